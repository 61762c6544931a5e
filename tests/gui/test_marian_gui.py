"""A MarianMT folder in the app: opened as a folder, its pieces shown, merged into words on request, and the head
trained to align marked in the grid (tiny random models built by transformers from real-corpus SentencePiece)."""

from __future__ import annotations

import numpy as np
import pytest

from attnviz.cli.main import main
from tests.gui.conftest import load, translate
from tests.marian_folder import build_marian_folder

pytest.importorskip("transformers", reason="building a Marian folder needs the test extra")
pytestmark = pytest.mark.data

SENTENCE = "Zwei Hunde spielen im Schnee."


@pytest.fixture(scope="module")
def marian_folder(tmp_path_factory, data_dir):
    folder = tmp_path_factory.mktemp("gui-marian") / "opus-mt-de-en"
    build_marian_folder(folder, data_dir)
    return str(folder)


def test_a_folder_opens_and_its_pieces_merge_into_words(qtbot, window, marian_folder):
    tab = load(qtbot, window, marian_folder)
    assert "MarianMT" in window.model_combo.currentText() or "opus-mt-de-en" in window.model_combo.currentText()
    translate(qtbot, window, SENTENCE)
    panel = tab.attention
    assert panel.merge_check.isEnabled()
    panel.select(kind="cross")
    pieces = panel.heatmap.data()
    assert "\u2581Zwei" in pieces.cols and pieces.cols[-1] == "<eos>"
    panel.merge_check.setChecked(True)
    words = panel.heatmap.data()
    assert words.cols == ("Zwei", "Hunde", "spielen", "im", "Schnee.", "<eos>")
    assert words.matrix.shape[1] == len(words.cols) < pieces.matrix.shape[1]
    np.testing.assert_allclose(words.matrix.sum(axis=1), 1.0, atol=1e-5)
    panel.select(kind="encoder")
    np.testing.assert_allclose(panel.heatmap.data().matrix.sum(axis=1), 1.0, atol=1e-5)
    panel.merge_check.setChecked(False)
    assert panel.heatmap.data().cols[0] == "\u2581Zwei"  # pieces again


def test_a_converted_model_marks_its_alignment_head(qtbot, window, marian_folder, tmp_path):
    out = tmp_path / "aligned.safetensors"
    assert main(["convert", marian_folder, "--out", str(out), "--alignment-head", "2.3"]) == 0
    tab = load(qtbot, window, str(out))
    translate(qtbot, window, SENTENCE)
    tab.attention.select(kind="cross")
    assert tab.attention.grid._marked == (1, 2)
    assert "head 3 was trained to align" in tab.attention.grid.accessibleDescription()
    tab.attention.select(kind="encoder")
    assert tab.attention.grid._marked is None  # only cross-attention is supervised
    plain = load(qtbot, window, marian_folder)
    translate(qtbot, window, SENTENCE)
    plain.attention.select(kind="cross")
    assert plain.attention.grid._marked is None
