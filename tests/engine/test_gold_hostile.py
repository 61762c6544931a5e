"""Gold files that crashed or scored silently (issue 38): a NAACL sentence id in Unicode digits (``<s snum=²>``)
raised ValueError; a gold file of empty lines scored AER 1.0 for every head with exit 0; a byte order mark at the
start of a gold file was refused. Each file is built here."""

from __future__ import annotations

import pytest

from attnviz.cli.main import main
from attnviz.engine.analysis.goldset import read_set
from attnviz.engine.analysis.naacl import sentence_key
from attnviz.engine.errors import InputError
from tests.helpers import make_toy_translator


def _write(tmp_path, name: str, text: str, encoding: str = "utf-8") -> str:
    path = tmp_path / name
    path.write_text(text, encoding=encoding)
    return str(path)


def test_a_unicode_digit_sentence_id_is_a_name_not_a_number(tmp_path):
    assert sentence_key("0007") == "7" and sentence_key("²") == "²" and sentence_key("٣") == "٣"
    src = _write(tmp_path, "src.txt", "<s snum=²> das haus </s>\n<s snum=0002> ja </s>\n")
    tgt = _write(tmp_path, "tgt.txt", "<s snum=²> the house </s>\n<s snum=2> yes </s>\n")
    gold = _write(tmp_path, "gold.naacl", "2 1 1 S\n")
    found = read_set(src=src, tgt=tgt, gold=gold)
    assert found.sure == (frozenset(), frozenset({(0, 0)}))
    gold_naming_it = _write(tmp_path, "bad.naacl", "² 1 1 S\n2 1 1\n")  # not a link line: ASCII digits only
    with pytest.raises(InputError, match=r"bad\.naacl, line 1: "):
        read_set(src=src, tgt=tgt, gold=gold_naming_it)


def test_a_gold_file_of_empty_lines_says_the_gold_set_has_no_links(tmp_path, capsys):
    text = _write(tmp_path, "pairs.txt", "das haus ||| the house\nja ||| yes\n")
    gold = _write(tmp_path, "gold.txt", "\n\n")
    message = (f"{gold}: the gold set has no links (every line is empty), so there is nothing to score alignments "
               "against; give the gold file that holds the links")
    with pytest.raises(InputError) as err:
        read_set(text, gold=gold)
    assert str(err.value) == message
    model = tmp_path / "toy.safetensors"
    make_toy_translator().save(model, name="toy")
    assert main(["align", "-m", str(model), "--text", text, "--gold", gold]) == 2  # input errors exit 2
    assert capsys.readouterr().err == f"attnviz: error: {message}\n"


def test_a_byte_order_mark_at_the_start_of_a_gold_file_is_accepted(tmp_path):
    text = _write(tmp_path, "pairs.txt", "das haus ||| the house\nja ||| yes\n")
    plain = read_set(text, gold=_write(tmp_path, "gold.txt", "1-1 2-2\n1-1\n"))
    marked = read_set(text, gold=_write(tmp_path, "bom.txt", "1-1 2-2\n1-1\n", encoding="utf-8-sig"))
    assert marked.sure == plain.sure == (frozenset({(0, 0), (1, 1)}), frozenset({(0, 0)}))
    naacl = read_set(text, gold=_write(tmp_path, "bom.naacl", "1 1 1 S\n2 1 1 P\n", encoding="utf-8-sig"))
    assert naacl.sure == (frozenset({(0, 0)}), frozenset()) and naacl.gold_format.startswith("NAACL")
