"""Every numeric option of every command refuses hostile values as a usage error: exit 2, one error line, no traceback
and no silently changed result (issue 30). The options are found by walking the parsers, so a new one is covered."""

from __future__ import annotations

import argparse

import pytest

from attnviz.cli.args import Number
from attnviz.cli.main import build_parser, main
from attnviz.engine.analysis.alignment import parse_pharaoh
from attnviz.engine.analysis.goldset import read_set
from attnviz.engine.errors import InputError

HOSTILE = ["nan", "inf", "-inf", "", "9" * 5000, "1e999", "+-5", "²", "ten"]


def _commands() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _numeric_options() -> list[tuple[str, str, Number]]:
    return [(name, action.option_strings[-1], action.type) for name, parser in _commands().items()
            for action in parser._actions if isinstance(action.type, Number)]


def test_no_option_reads_a_number_with_a_bare_int_or_float():
    bare = [(name, action.option_strings) for name, parser in _commands().items() for action in parser._actions
            if action.type in (int, float)]
    assert bare == []
    found = {(name, option) for name, option, _ in _numeric_options()}
    assert {("align", "--threshold"), ("align", "--limit"), ("align", "--layer"), ("heads", "--limit"),
            ("train", "--lr"), ("train", "--epochs"), ("translate", "--beam"), ("generate", "--seed")} <= found


def _usage_error(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2, (argv[:2], err)
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1 and "Traceback" not in err, err
    assert len(errors[0]) < 200  # a 5,000-digit value is quoted cut short
    return errors[0]


@pytest.mark.parametrize("command,option,kind", _numeric_options(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_numeric_option_refuses_hostile_values(capsys, command, option, kind):
    values = HOSTILE + ([str(kind.low - 1)] if kind.low is not None else [])
    if kind.kind is int:
        values.append("2.5")
    for value in values:
        line = _usage_error(capsys, [command, f"{option}={value}"])
        assert option in line


@pytest.mark.parametrize("argv,words", [
    (["align", "--limit=-1"], "must be from 0"),
    (["heads", "--limit=-3"], "must be from 0"),
    (["align", "--threshold=nan"], "must be a number from 0 to 1, not 'nan'"),
    (["align", "--threshold=1.5"], "must be a number from 0 to 1"),
    (["align", "--layer=0"], "must be from 1"),  # layers and heads count from 1 in every output
    (["translate", "--beam=" + "9" * 5000], "expected a whole number, not '99999999999999999999...99999999'"),
])
def test_the_reported_options(capsys, argv, words):
    assert words in _usage_error(capsys, argv)


@pytest.mark.parametrize("args,words", [
    (["--lr", "-1"], "lr must be positive"),
    (["--epochs", "0"], "epochs must be at least 1"),
    (["--set", "train.lr=inf"], "lr must be a finite number, not 'inf'"),
    (["--set", "train.lr=Infinity"], "lr must be a finite number, not inf"),
    (["--set", "train.epochs=2.5"], "epochs must be a whole number, not 2.5"),
    (["--set", "train=[]"], "TrainConfig: the settings must be a JSON object"),
    (["--set", "corpus.kind=files", "--set", 'corpus.paths={"train": [], "val": ["v.tsv"]}'],
     "corpus.paths['train'] must list a source and a target file, or one TAB-separated file, not []"),
])
def test_recipe_values_a_flag_sets_are_usage_errors_the_recipe_names(capsys, args, words):
    assert main(["train", "--preset", "names-char", "--max-steps", "1", *args]) == 2  # before any data is read
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err, err


def test_a_gold_link_is_read_exactly_or_refused():
    sure, possible = parse_pharaoh("0-0 1?2 3-4-P 5-6-s")
    assert sure == {(0, 0), (5, 6)} and possible == {(0, 0), (1, 2), (3, 4), (5, 6)}
    for bad in ("0-0-X", "1?2-P", "0-1-2-3", "-1-0", "0-" + "9" * 5000, "a-b", "0 - 1"):
        with pytest.raises(ValueError, match="not a link"):
            parse_pharaoh(bad)


def test_a_bad_gold_file_names_the_file(tmp_path):
    gold, pairs = tmp_path / "gold.txt", tmp_path / "pairs.txt"
    gold.write_text("0-0 1-1-X\n", encoding="utf-8")
    pairs.write_text("a b ||| c d\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"gold\.txt, line 1: not a link: '1-1-X'"):
        read_set(str(pairs), gold=str(gold))


def test_a_head_number_of_thousands_of_digits_is_out_of_range(capsys, tmp_path, trained_translator):
    path = tmp_path / "toy.safetensors"
    trained_translator.save(path, name="toy")
    assert main(["translate", "-m", str(path), "--mask-heads", "cross:" + "9" * 5000 + ".1", "q1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the model's cross attention has layers 1-" in err and len(err) < 300, err
