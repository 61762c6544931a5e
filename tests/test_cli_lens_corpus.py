"""``attnviz attribute --method logit-lens --corpus FILE``, in-process through ``main``: the per-layer table of
language shares (the engine's numbers), --json, --out as CSV or JSON, --plot as PNG/SVG, progress on stderr, an LLM
told to translate German into French through --src-lang/--tgt-lang, the single-sentence lens' language row, and
each refusal in one line."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from attnviz.cli.main import main
from attnviz.engine.attribution.lens_languages import lens_language_steps
from attnviz.engine.loading import load_translator
from attnviz.engine.text.token_language import LANGUAGES

MODEL = Path(__file__).resolve().parents[1] / "models" / "de-en-multi30k.safetensors"
SENTENCES = ["Ein Mann fährt Fahrrad .", "", "Zwei Hunde spielen im Schnee .", "Eine Frau liest ein Buch ."]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("lens") / "de.txt"
    path.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def expected():
    return list(lens_language_steps(load_translator(MODEL), [s for s in SENTENCES if s]))[-1]


def _run(capsys, *args, model=MODEL):
    code = main(["attribute", "-m", str(model), "--method", "logit-lens", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_the_table_the_files_and_the_plot(corpus, expected, capsys, tmp_path):
    out_csv, plot = tmp_path / "shares.csv", tmp_path / "shares.png"
    code, out, err = _run(capsys, "--corpus", str(corpus), "--out", str(out_csv), "--plot", str(plot))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith(f"logit lens by language: 3 sentences, {expected.steps} output steps per layer")
    assert lines[1].split() == ["layer", "English", "German", "French", "other", "script", "unknown"]
    for layer, line in enumerate(lines[2:2 + expected.layers]):
        assert line.split() == [str(layer + 1), *(f"{v:.3f}" for v in expected.shares()[layer])]
    assert lines[-1].startswith("note: the language of a token is a heuristic guess")
    assert err.splitlines()[-1] == "logit lens: 3/3 sentences"  # progress on stderr
    assert out_csv.read_text(encoding="utf-8") == expected.csv_text()
    with open(out_csv, encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert all(abs(sum(float(r[f"share_{lang}"]) for lang in LANGUAGES) - 1) < 1e-5 for r in rows)
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    code, _, _ = _run(capsys, "--corpus", str(corpus), "--limit", "1", "--plot", str(tmp_path / "s.svg"),
                      "--out", str(tmp_path / "s.json"))
    assert code == 0 and (tmp_path / "s.svg").read_text(encoding="utf-8").lstrip().startswith("<?xml")
    data = json.loads((tmp_path / "s.json").read_text(encoding="utf-8"))
    assert data["sentences"] == 1 and data["settings"]["limit"] == 1 and data["settings"]["corpus"] == "de.txt"


def test_json_says_the_settings_and_the_counts(corpus, expected, capsys):
    code, out, _ = _run(capsys, "--corpus", str(corpus), "--json", "--max-len", "20")
    data = json.loads(out)
    assert code == 0 and data["method"] == "logit-lens languages" and not data["stopped"]
    assert data["settings"] == {"model": "de-en-multi30k", "corpus": "de.txt", "limit": None, "src_lang": "de",
                                "tgt_lang": "en", "prompt": None, "decoding": "greedy", "max_len": 20}
    assert [row["counts"] for row in data["layers"]] == expected.counts.tolist()  # no sentence reaches 20 tokens
    assert list(data["languages"]) == list(LANGUAGES)


def test_an_llm_translating_german_into_french(tmp_path, capsys):
    from tests.llm_folder import make_llm_folder  # transformers: the test-only extra

    folder = make_llm_folder(tmp_path, "qwen2")
    corpus = tmp_path / "de.txt"
    corpus.write_text("Der Mann sieht den Hund.\nDas Haus ist rot.\n", encoding="utf-8")
    code, out, err = _run(capsys, "--corpus", str(corpus), "--src-lang", "de", "--tgt-lang", "fr", "--max-len", "4",
                          "--json", model=folder)
    data = json.loads(out)
    assert code == 0, err
    assert (data["settings"]["src_lang"], data["settings"]["tgt_lang"]) == ("de", "fr")
    assert len(data["layers"]) == load_translator(folder).config.dec_layers and data["sentences"] == 2
    assert all(sum(row["counts"]) == data["steps_counted"] for row in data["layers"])
    np.testing.assert_allclose([sum(row[lang] for lang in LANGUAGES) for row in data["layers"]], 1.0)


def test_one_sentences_lens_says_each_layers_language(capsys):
    code, out, _ = _run(capsys, "--json", "Ein Mann fährt Fahrrad .")
    data = json.loads(out)
    assert code == 0 and np.array(data["top_language"]).shape == np.array(data["chosen_rank"]).shape
    assert data["languages"] == list(LANGUAGES) and "heuristic" in data["language_guess"]
    assert data["tokens"][:5] == ["a", "man", "rides", "a", "bicycle"]  # the last layer's top tokens (greedy)
    assert data["top_language"][-1][:5] == ["unknown", "unknown", "en", "unknown", "en"]  # "a": English and
    # French, "man": English and German, "rides" and "bicycle": English


@pytest.mark.parametrize("args, message", [
    (["--plot", "x.png", "Ein Hund ."], "--plot is for the logit lens over a corpus: add --corpus FILE"),
    (["--limit", "3", "Ein Hund ."], "--limit is for the logit lens over a corpus: add --corpus FILE"),
    (["--corpus", "{corpus}", "Ein Hund ."], "--corpus reads its sentences from the file; give no SENTENCE"),
    (["--corpus", "{corpus}", "--target", "a dog"], "--corpus reads its sentences from the file; give no --target"),
    (["--corpus", "{corpus}", "--out", "x.npz"], "--out x.npz: with --corpus it writes .json or .csv; name the "
                                                 "file so"),
    (["--corpus", "{corpus}", "--foil", "dog"], "the logit lens takes none of --foil, --steps, --baseline, "
                                                "--aggregate, --probability, --corrupt"),
    (["--corpus", "{corpus}", "--plot", "x.csv"], "--plot x.csv: with --corpus it writes .png or .svg or .pdf; name "
                                                  "the file so"),
])
def test_refusals(corpus, capsys, args, message):
    code, out, err = _run(capsys, *[a.replace("{corpus}", str(corpus)) for a in args])
    assert (code, out, err) == (2, "", f"attnviz: error: {message}\n")


def test_corpus_is_for_the_lens_only(corpus, capsys):
    code = main(["attribute", "-m", str(MODEL), "--method", "saliency", "--corpus", str(corpus)])
    assert code == 2 and capsys.readouterr().err == ("attnviz: error: --corpus reads the logit lens over a corpus; "
                                                     "use it with --method logit-lens\n")


def test_ctrl_c_stops_after_the_sentence_and_keeps_its_shares(corpus, capsys, monkeypatch):
    import os
    import signal

    from attnviz.engine.attribution import lens_languages

    read = lens_languages._lens

    def interrupted(*args):  # Ctrl+C while the first sentence is read
        os.kill(os.getpid(), signal.SIGINT)
        return read(*args)

    monkeypatch.setattr(lens_languages, "_lens", interrupted)
    before = signal.getsignal(signal.SIGINT)  # Python's own, or ignored where the run was started in the background
    code, out, err = _run(capsys, "--corpus", str(corpus))
    assert code == 130 and out.startswith("logit lens by language: 1 sentence, ")
    assert err.splitlines()[-1] == "attnviz: stopped after 1 of 3 sentences; the shares are theirs"
    assert signal.getsignal(signal.SIGINT) is before  # Ctrl+C is handled as before the command again


def test_a_missing_or_empty_corpus_and_the_lstm_are_said_in_one_line(tmp_path, corpus, capsys):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n \n", encoding="utf-8")
    code, out, err = _run(capsys, "--corpus", str(tmp_path / "none.txt"))
    assert (code, out, err) == (1, "", f"attnviz: error: {tmp_path / 'none.txt'}: no such file.\n")
    code, out, err = _run(capsys, "--corpus", str(empty))
    assert (code, err) == (2, "attnviz: error: The corpus has no sentences: give a file with one sentence per line.\n")
    code, out, err = _run(capsys, "--corpus", str(corpus), model=MODEL.with_name("de-en-lstm-multi30k.safetensors"))
    assert code == 2 and err.startswith("attnviz: error: The logit lens is not defined for a LSTM") and "\n" == err[-1]
    assert err.count("\n") == 1
