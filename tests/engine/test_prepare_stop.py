"""Stopping a run while its data is prepared ends it within a few sentences (issue 38: closing the app then took
23-69 s, as the whole corpus was tokenized first): ``prepare`` reads the stop event every ``CHECK_EVERY`` sentences
and the training generator ends with one note, having trained and saved nothing."""

from __future__ import annotations

import threading

import pytest

from attnviz.engine.events import TrainNote
from attnviz.engine.text.tokenize import TokenizerSpec
from attnviz.engine.training import prepare as prepare_module
from attnviz.engine.training.loop import STOPPED_PREPARING, train
from attnviz.engine.training.prepare import CHECK_EVERY, PreparationStopped, prepare
from tests.engine.test_run_safety import small_recipe


def _stop_after(monkeypatch, n: int) -> tuple[threading.Event, dict]:
    """A stop event set (as a closing window sets it) once ``n`` sentences were tokenized; counts them all."""
    stop, seen = threading.Event(), {"n": 0}
    real = TokenizerSpec.tokenize

    def tokenize(self, text):
        seen["n"] += 1
        if seen["n"] == n:
            stop.set()
        return real(self, text)

    monkeypatch.setattr(TokenizerSpec, "tokenize", tokenize)
    return stop, seen


def test_prepare_stops_within_a_few_sentences_of_the_stop(tmp_path, monkeypatch):
    recipe = small_recipe(tmp_path)
    assert len(prepare(recipe).train) == 48  # the whole corpus when nobody stops it
    assert CHECK_EVERY <= 64  # a real corpus (29,000 Multi30k pairs) is looked at hundreds of times
    monkeypatch.setattr(prepare_module, "CHECK_EVERY", 4)  # the toy corpus has 48 training pairs
    stop, seen = _stop_after(monkeypatch, 2 * 10)  # two tokenize calls a pair: stopped at the tenth pair
    with pytest.raises(PreparationStopped):
        prepare(recipe, stop=stop)
    assert 2 * 10 <= seen["n"] <= 2 * (10 + 4)  # at most one more stretch of CHECK_EVERY pairs, not the corpus


def test_a_run_stopped_while_preparing_ends_with_one_note_and_saves_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(prepare_module, "CHECK_EVERY", 4)  # the toy corpus is shorter than one real stretch
    stop, seen = _stop_after(monkeypatch, 2)
    out = tmp_path / "run.safetensors"
    events = list(train(small_recipe(tmp_path), out, None, stop=stop))
    assert events == [TrainNote(STOPPED_PREPARING)]
    assert seen["n"] <= 2 * 4 + 2
    assert not list(tmp_path.glob("run*"))  # nothing trained, nothing saved
    assert STOPPED_PREPARING == ("Stopped while the data was being prepared: nothing was trained, and nothing was "
                                 "saved.")


def test_reading_a_large_corpus_stops_within_a_stretch_of_lines(tmp_path):
    from attnviz.engine.corpus import reader

    path = tmp_path / "big.txt"
    path.write_text("".join(f"line {i}\n" for i in range(10 * reader.STOP_EVERY_LINES)), encoding="utf-8")
    assert len(reader.read_lines(path, threading.Event())) == 10 * reader.STOP_EVERY_LINES
    stop = threading.Event()
    stop.set()
    with pytest.raises(PreparationStopped):
        reader.read_lines(path, stop)  # at line STOP_EVERY_LINES, not after the whole file
    with pytest.raises(PreparationStopped):
        reader.read_tsv(path, 0, 0, stop=stop)
