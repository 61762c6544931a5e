"""The NAACL 2003 shared task's formats (the English-French Hansards and Romanian-English sets), read by the same set
reader as the i-j lines: one link per line with or without S/P and confidence, NULL links, sentence ids missing or
out of order, <s snum=...> text lines, --reverse, the format detected and said, and hostile files refused with file,
line and what to do. Hand-made sets only (the published ones are never in the repository)."""

from __future__ import annotations

import pytest

from attnviz.engine.analysis import naacl
from attnviz.engine.analysis.goldset import PHARAOH, read_set
from attnviz.engine.analysis.scoring import aer, score_links
from attnviz.engine.errors import DataError, InputError
from tests.engine.test_goldset import _write


@pytest.fixture()
def hansards(tmp_path):
    """Three pairs as the Hansards are published: English (L1) first, '<s snum=...>' lines, trailing spaces; the
    gold lists sentence 3 before sentence 1, sentence 2 has no link (absent), a NULL link, and S/P/none/confidence."""
    en = _write(tmp_path, "test.e", "<s snum=0001> they had gone . </s>\n<s snum=0002> yes </s>\n"
                                    "<s snum=0003> the house </s> \n")
    fr = _write(tmp_path, "test.f", "<s snum=0001> ils etaient alles . </s>\n<s snum=0002> oui </s>\n"
                                    "<s snum=0003> la maison </s>\n")
    gold = _write(tmp_path, "test.wa", "0003 2 2 S\n0003 1 1 P 0.9 \n0001 1 1\n0001 2 2 S 1\n0001 3 3 P\n"
                                       "0001 4 4 S\n0001 0 3 S\n0001 3 0 P\n")
    return en, fr, gold


def test_naacl_links_with_and_without_s_p_confidence_and_null(hansards):
    en, fr, gold = hansards
    found = read_set(src=en, tgt=fr, gold=gold)  # an English -> French model: L1 is its source
    assert found.sources == (("they", "had", "gone", "."), ("yes",), ("the", "house"))
    assert found.targets[0] == ("ils", "etaient", "alles", ".")
    assert found.sure == (frozenset({(0, 0), (1, 1), (3, 3)}), frozenset(), frozenset({(1, 1)}))
    assert found.possible == (frozenset({(0, 0), (1, 1), (2, 2), (3, 3)}), frozenset(), frozenset({(0, 0), (1, 1)}))
    assert found.gold_format == naacl.NAME and found.null_links == 2 and found.sentence_ids
    assert found.gold_format_reason == ("detected: line 1 is 'sentence position_L1 position_L2 [S|P] [confidence]'")
    assert found.indexing == "1-based"
    assert found.describe() == (
        "gold: NAACL 2003 (one link per line) (detected: line 1 is 'sentence position_L1 position_L2 [S|P] "
        "[confidence]'); 1-based (the NAACL 2003 format counts positions from 1); 2 links to NULL (position 0) "
        "ignored")
    assert found.to_json()["null_links_ignored"] == 2 and found.to_json()["sentence_ids"] == "<s snum=...>"


def test_naacl_reversed_for_a_french_to_english_model_and_aer_by_hand(hansards):
    en, fr, gold = hansards
    found = read_set(src=fr, tgt=en, gold=gold, reverse=True)
    assert found.sources[2] == ("la", "maison") and found.sure[2] == frozenset({(1, 1)})
    assert found.possible[0] == frozenset({(0, 0), (1, 1), (2, 2), (3, 3)})
    # predicted: pair 1 {0-0, 2-2, 2-1}, pair 2 nothing, pair 3 {0-0, 1-0}
    # |A| = 5, |S| = 4 (three, none, one), |A & S| = 1 (0-0), |A & P| = 3 (0-0, 2-2; 0-0)
    # AER = 1 - (1 + 3) / (5 + 4) = 5/9; precision 3/5, recall 1/4
    predicted = [{(0, 0), (2, 2), (2, 1)}, set(), {(0, 0), (1, 0)}]
    sure, possible = [set(s) for s in found.sure], [set(p) for p in found.possible]
    score = score_links(predicted, sure, possible)
    assert score.aer == pytest.approx(5 / 9) and score.precision == pytest.approx(3 / 5)
    assert score.recall == pytest.approx(1 / 4)


def test_naacl_gold_with_plain_text_numbers_pairs_by_line(tmp_path):
    text = _write(tmp_path, "pairs.txt", "a b ||| c d \ne ||| f \n")
    gold = _write(tmp_path, "gold.wa", "2 1 1\n1 1 2 S\n1 2 1 P\n")  # sentence 2 first: order does not matter
    found = read_set(text, gold=gold, one_based=True)
    assert found.sure == (frozenset({(0, 1)}), frozenset({(0, 0)}))
    assert found.possible == (frozenset({(0, 1), (1, 0)}), frozenset({(0, 0)}))
    assert found.indexing_reason == "--one-based" and not found.sentence_ids
    # the AER of the same hand-made gold read from an i-j file is the same
    same = read_set(text, gold=_write(tmp_path, "gold.talp", "1-2 2p1 \n1-1 \n"))
    assert same.gold_format == PHARAOH and same.sure == found.sure and same.possible == found.possible
    predicted = [{(0, 1), (1, 1)}, {(0, 0)}]
    assert aer(predicted, list(map(set, found.sure)), list(map(set, found.possible))) == pytest.approx(
        1 - (2 + 2) / (3 + 2))


def test_naacl_refusals_name_file_line_and_what_to_do(tmp_path, hansards):
    en, fr, _ = hansards
    cases = {
        "unknown.wa": ("0001 1 1\n0009 1 1\n", r"unknown\.wa, line 2: sentence 0009 is not in .*test\.e and .*test\.f "
                                              r"\(sentences named by their <s snum=\.\.\.>\); check that the gold file "
                                              r"belongs to this text"),
        "mixed.wa": ("0001 1 1\n1-1 2-2\n", r"mixed\.wa, line 2: not a NAACL 2003 link line: '1-1 2-2' \(expected "
                                            r"'sentence position_L1 position_L2 \[S\|P\] \[confidence\]', positions "
                                            r"from 1; line 1 is in that format, so every line must be\)"),
        "negative.wa": ("0001 1 1\n0001 -1 2\n", r"negative\.wa, line 2: not a NAACL 2003 link line: '0001 -1 2'"),
        "kind.wa": ("0001 1 1 X\n", r"kind\.wa, line 1: not a link: '0001' \(expected i-j \(sure\), ipj or i\?j "
                                    r"\(possible\), i-j-S or i-j-P\); or, one link per line, 'sentence position_L1 "
                                    r"position_L2 \[S\|P\] \[confidence\]' \(NAACL 2003\)"),
        "past.wa": ("0003 3 1\n", r"past\.wa, line 1: pair 3's link 3 1 names source word 3, but the source side has "
                                  r"2 words \(1-based: the NAACL 2003 format counts positions from 1"),
    }
    for name, (text, message) in cases.items():
        with pytest.raises(InputError, match=message):
            read_set(src=en, tgt=fr, gold=_write(tmp_path, name, text))
    with pytest.raises(InputError, match=r"the NAACL 2003 format numbers words from 1 \(0 is NULL\); --zero-based "
                                         r"does not apply"):
        read_set(src=en, tgt=fr, gold=_write(tmp_path, "ok.wa", "1 1 1\n"), one_based=False)


def test_sentence_lines_must_agree_and_stay_tagged(tmp_path, hansards):
    en, fr, gold = hansards
    other = _write(tmp_path, "other.f", "<s snum=0001> a </s>\n<s snum=0003> b </s>\n<s snum=0002> c </s>\n")
    with pytest.raises(InputError, match=r"other\.f, line 2: sentence 3, but line 2 of .*test\.e is sentence 2; the "
                                         r"two sides must list the same sentences in the same order"):
        read_set(src=en, tgt=other, gold=gold)
    untagged = _write(tmp_path, "half.e", "<s snum=1> a </s>\nb c\n")
    with pytest.raises(InputError, match=r"half\.e, line 2: not a sentence line '<s snum=ID> words </s>': 'b c'"):
        read_set(src=untagged, tgt=fr)
    twice = _write(tmp_path, "twice.e", "<s snum=1> a </s>\n<s snum=01> b </s>\n<s snum=3> c </s>\n")
    with pytest.raises(InputError, match=r"twice\.e, line 2: sentence id 1 was already used on line 1"):
        read_set(src=twice, tgt=fr)


def test_hostile_gold_files_are_refused_clearly(tmp_path, hansards):
    en, fr, _ = hansards
    binary = tmp_path / "binary.wa"
    binary.write_bytes(b"\x00\x01\x02PK\x03\x04" * 50)
    with pytest.raises(DataError, match=r"binary\.wa, line 1: contains NUL bytes; this is binary data"):
        read_set(src=en, tgt=fr, gold=str(binary))
    wide = _write(tmp_path, "wide.wa", "1 " * 1_000_000 + "\n")
    with pytest.raises(InputError, match=r"wide\.wa, line 1: not a link: '1'"):  # a million columns: not NAACL
        read_set(src=en, tgt=fr, gold=wide)
    huge = _write(tmp_path, "huge.wa", "1 1 " + "9" * 5000 + "\n")
    with pytest.raises(InputError, match=r"huge\.wa, line 1: not a link: '1'"):
        read_set(src=en, tgt=fr, gold=huge)
    wide_naacl = _write(tmp_path, "widen.wa", "1 1 1\n" + "1 1 1 S 0.5 " * 200_000 + "\n")
    with pytest.raises(InputError, match=r"widen\.wa, line 2: not a NAACL 2003 link line: '1 1 1 S 0\.5 1 1 1 S "
                                         r"0\.5 1 1 1 S 0\.5 1 1 \.\.\.'"):
        read_set(src=en, tgt=fr, gold=wide_naacl)
