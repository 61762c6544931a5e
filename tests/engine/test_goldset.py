"""Published alignment sets read as published: '|||' pairs or two files, i-j/ipj/i?j links, numbering from the
flags or detected, --reverse, trailing spaces, and every refusal with its file and line."""

from __future__ import annotations

import pytest

from attnviz.engine.analysis.goldset import parse_pharaoh, read_set
from attnviz.engine.errors import InputError


def _write(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


@pytest.fixture()
def published(tmp_path):
    """Two pairs in the published form: 1-based, ipj, '|||', trailing spaces on both kinds of line."""
    text = _write(tmp_path, "pairs.txt", "das haus ist klein ||| the house is small \nja ||| yes indeed \n")
    gold = _write(tmp_path, "gold.txt", "1-1 2-2 3p3 4-4 \n1-1 1p2 \n")
    return text, gold


def test_the_published_form_is_read_1_based_and_detected(published):
    text, gold = published
    found = read_set(text, gold=gold)
    assert found.sources == (("das", "haus", "ist", "klein"), ("ja",))
    assert found.targets == (("the", "house", "is", "small"), ("yes", "indeed"))
    assert found.sure == (frozenset({(0, 0), (1, 1), (3, 3)}), frozenset({(0, 0)}))
    assert found.possible == (frozenset({(0, 0), (1, 1), (2, 2), (3, 3)}), frozenset({(0, 0), (0, 1)}))
    assert found.indexing == "1-based"
    assert found.indexing_reason == ("detected: line 1 numbers a sentence's last word by its word count, which only "
                                     "1-based has")
    said = read_set(text, gold=gold, one_based=True)
    assert said.sure == found.sure and said.indexing_reason == "--one-based"
    assert found.to_json() == {"files": {"text": text, "gold": gold}, "pairs": 2, "reverse": False,
                               "sentence_ids": "line numbers", "gold_format": "one line per pair (i-j, ipj)",
                               "gold_format_decided_by": "detected: line 1 holds i-j links",
                               "indexing": "1-based", "indexing_decided_by": found.indexing_reason,
                               "null_links_ignored": 0}


def test_two_files_reversed_and_zero_based(tmp_path, published):
    # the same set as the English-French Hansards are published: target language first, in two files
    src = _write(tmp_path, "de.txt", "das haus ist klein\nja\n")
    tgt = _write(tmp_path, "en.txt", "the house is small\nyes indeed\n")
    gold = _write(tmp_path, "en-de.txt", "1-1 2-2 3?3 4-4\n1-1 2p1\n")
    assert read_set(src=src, tgt=tgt, gold=gold, reverse=True).possible == read_set(published[0],
                                                                                    gold=published[1]).possible
    flipped = _write(tmp_path, "flipped.txt", "the house is small ||| das haus ist klein\nyes indeed ||| ja\n")
    found = read_set(flipped, gold=gold, reverse=True)
    assert found.sources[0] == ("das", "haus", "ist", "klein") and found.sure[1] == frozenset({(0, 0)})
    zero = _write(tmp_path, "zero.txt", "0-0 1-1\n0-1\n")
    found = read_set(src=src, tgt=tgt, gold=zero)
    assert found.indexing == "0-based" and found.sure == (frozenset({(0, 0), (1, 1)}), frozenset({(0, 1)}))
    assert found.indexing_reason == "detected: line 1 has a word number 0, which only 0-based numbering has"


def test_ambiguous_or_mixed_numbering_is_refused_with_how_to_choose(tmp_path, published):
    text = published[0]
    middle = _write(tmp_path, "middle.txt", "2-2 3-3\n\n")  # no 0, no 4 in a 4-word pair, line 2 empty
    with pytest.raises(InputError, match=r"middle\.txt: cannot tell whether words are numbered from 0 or from 1 .*"
                                         r"say it with --one-based \(as the published sets\) or --zero-based"):
        read_set(text, gold=middle)
    assert read_set(text, gold=middle, one_based=True).sure[0] == frozenset({(1, 1), (2, 2)})
    assert read_set(text, gold=middle, one_based=False).sure[0] == frozenset({(2, 2), (3, 3)})
    mixed = _write(tmp_path, "mixed.txt", "0-0\n1-2\n")
    with pytest.raises(InputError, match=r"mixed\.txt: line 1 has a word number 0 \(0-based\) and line 2 a number "
                                         r"equal to its sentence's word count \(1-based\): check --reverse"):
        read_set(text, gold=mixed)


def test_bad_sets_are_refused_with_file_and_line(tmp_path, published):
    text, gold = published
    past = _write(tmp_path, "past.txt", "1-1 5-4\n1-1\n")
    with pytest.raises(InputError) as caught:
        read_set(text, gold=past, one_based=True)
    assert str(caught.value) == (f"{past}, line 1: link 5-4 names source word 5, but the source side has 4 words "
                                 "(1-based: --one-based; the file lists the source first); check --reverse and "
                                 "--one-based")
    with pytest.raises(InputError, match=r"line 2: link 0-0 names source word 0, but the source side has 1 words "
                                         r"\(1-based"):
        read_set(text, gold=_write(tmp_path, "g0.txt", "1-1\n0-0\n"), one_based=True)
    short = _write(tmp_path, "short.txt", "1-1\n")
    with pytest.raises(InputError, match=r"short\.txt has 1 lines but .*pairs\.txt has 2 sentence pairs: the gold "
                                         r"file needs one line per pair"):
        read_set(text, gold=short)
    with pytest.raises(InputError, match=r"bad\.txt, line 2: not a link: '0-0-X' \(expected i-j \(sure\), ipj or "
                                         r"i\?j \(possible\), i-j-S or i-j-P\)"):
        read_set(text, gold=_write(tmp_path, "bad.txt", "1-1\n0-0-X\n"))
    with pytest.raises(InputError, match=r"nosep\.txt, line 1: expected one pair 'source \|\|\| target', found 0"):
        read_set(_write(tmp_path, "nosep.txt", "das haus\n"))
    with pytest.raises(InputError, match=r"empty\.txt, line 1: the target side is empty"):
        read_set(_write(tmp_path, "empty.txt", "das haus |||  \n"))
    with pytest.raises(InputError, match="--text PAIRS"):
        read_set(text, src=text, tgt=text)


def test_limit_keeps_the_first_pairs_after_checking_the_whole_files(published):
    found = read_set(published[0], gold=published[1], limit=1)
    assert len(found.sources) == 1 and len(found.sure) == 1 and found.indexing == "1-based"


def test_a_link_is_read_exactly_or_refused():
    assert parse_pharaoh("1-2 2p3 3?4 4-5-P 6-7-s") == ({(1, 2), (6, 7)}, {(1, 2), (2, 3), (3, 4), (4, 5), (6, 7)})
    for bad in ("0-0-X", "1p2p3", "1?2-P", "p1", "1 p2", "1-"):
        with pytest.raises(ValueError, match="not a link"):
            parse_pharaoh(bad)


def test_blank_lines_at_the_end_and_latin_1(tmp_path):
    # the German-English set's files end with a blank line; its last pair here has no links (a blank gold line)
    text = _write(tmp_path, "pairs.txt", "a b ||| c d\nx ||| y\n\n\n")
    gold = _write(tmp_path, "gold.txt", "1-2 2-1\n\n\n")
    found = read_set(text, gold=gold)
    assert len(found.sources) == 2 and found.sure == (frozenset({(0, 1), (1, 0)}), frozenset())
    latin = tmp_path / "de.txt"
    latin.write_bytes("schön ||| nice\n".encode("latin-1"))
    with pytest.raises(InputError, match=r"de\.txt, line 1: not valid UTF-8 text\. Convert the file to UTF-8 first "
                                         r"\(the German-English set is Latin-1\): iconv -f latin1 -t utf-8"):
        read_set(str(latin))
