"""The logit lens' layer x step strip in the Translate tab (issue 37): the Strip button swaps the table for the strip,
whose cells (a row per decoder layer, the last at the top, a column per step) say the language of each layer's top
token in their colour and their exact values on hover; a click shows that step; the legend names every colour; the
strip and its legend are in sight at 1366x768, 1024x700 and 1920x1080, the map staying the largest view; Export
writes the strip as PNG/SVG and every cell as CSV/JSON. Screenshots: ATTNVIZ_SHOTS=folder."""

import csv
import json
import os
from pathlib import Path

import pytest
from PySide6.QtCore import QPoint, QRect, Qt

from attnviz.engine.attribution.logit_lens import logit_lens_steps
from attnviz.engine.text.token_language import LANGUAGES
from attnviz.gui.translate.lens_strip import cell_tip
from attnviz.plots.language_colours import LANGUAGE_COLOURS
from tests.gui.conftest import load, translate

MODELS = Path(__file__).resolve().parents[2] / "models"
SENTENCE = "Ein Mann fährt mit dem Fahrrad eine Straße hinunter ."
SIZES = [(1366, 768), (1024, 700), (1920, 1080)]

pytestmark = pytest.mark.usefixtures("app_style")


def strip_shown(qtbot, window, size):
    tab = load(qtbot, window, str(MODELS / "de-en-multi30k.safetensors"))
    window.resize(*size)
    qtbot.waitUntil(lambda: (window.width(), window.height()) == size, timeout=3000)
    translate(qtbot, window, SENTENCE)
    page = tab.quantity.lens
    tab.search.side.setCurrentWidget(page.widget)
    qtbot.waitUntil(lambda: page.lens is not None, timeout=30000)
    page.strip_button.click()
    qtbot.waitUntil(lambda: page.strip.isVisible() and not tab.layout_state._refit.isActive(), timeout=5000)
    qtbot.wait(30)
    return tab, page


@pytest.mark.parametrize("size", SIZES)
def test_the_strip_colours_each_layers_top_token_by_language(qtbot, window, size, tmp_path):
    tab, page = strip_shown(qtbot, window, size)
    strip, lens = page.strip, page.lens
    t = tab.document.translation(-1)
    fresh = list(logit_lens_steps(tab.quantity.lens.translator, t.src_tokens, t.tokens, top_k=3))[-1]
    assert (lens.top_language == fresh.top_language).all() and set(lens.top_language.ravel()) <= set(LANGUAGES)
    assert "en" in set(lens.top_language[-1])  # the last layer predicts the English output: "man", "street"...
    whole = QRect(0, 0, strip.width(), strip.height())
    assert strip.visibleRegion().boundingRect() == whole  # the strip and its legend wholly drawn
    assert window.rect().contains(QRect(strip.mapTo(window, QPoint(0, 0)), strip.size()))
    grid = strip.grid_rect()
    assert grid.height() >= 3 * strip.fontMetrics().height() and grid.width() >= 150, (size, grid)
    image = strip.grab().toImage()
    ratio = image.width() / strip.width()
    for layer in range(lens.layers):  # each cell is painted in its language's colour, the last layer at the top
        for step in range(len(lens.tokens)):
            rect = strip.cell_rect(layer, step)
            assert rect.top() == pytest.approx(grid.top() + (lens.layers - 1 - layer) * grid.height() / lens.layers)
            assert strip.cell_at(rect.center().toPoint() + QPoint(0, 0)) == (layer, step)
            x, y = int(rect.left() * ratio) + 2, int(rect.top() * ratio) + 2  # a corner, clear of the text and dot
            colour = image.pixelColor(x, y).name().upper()
            if step != strip.step:  # the step shown is outlined in red
                assert colour == LANGUAGE_COLOURS[str(lens.top_language[layer, step])], (layer, step)
    tip = cell_tip(lens, 0, 1)
    assert tip.startswith(f"Layer 1, step 2 (chosen {lens.tokens[1]!r})")
    assert f"p(chosen) {lens.chosen_prob[0, 1]:.6f}, rank {int(lens.chosen_rank[0, 1])}" in tip
    assert "(a heuristic guess)" in tip
    if os.environ.get("ATTNVIZ_SHOTS"):
        window.grab().save(os.path.join(os.environ["ATTNVIZ_SHOTS"], f"lens-strip-{size[0]}x{size[1]}.png"))
    heatmap = tab.attention.heatmap  # the map stays the largest view
    cells = heatmap.map_rect()
    assert cells.width() * cells.height() >= 0.2 * size[0] * size[1], (size, cells)
    assert cells.width() * cells.height() > strip.width() * strip.height()
    cell = strip.cell_rect(0, 3).center().toPoint()
    qtbot.mouseClick(strip, Qt.MouseButton.LeftButton, pos=cell)
    assert tab.document.current == 3 and strip.step == 3  # the clicked step is shown everywhere
    page.strip_button.click()
    assert page.table.isVisible() and not strip.isVisible()  # back to the step's table


def test_export_writes_the_strip_and_every_cell(qtbot, window, tmp_path):
    tab, page = strip_shown(qtbot, window, SIZES[0])
    lens = page.lens
    for suffix in (".png", ".svg"):
        path = tmp_path / f"strip{suffix}"
        assert page.save_file(str(path)) == f"Logit lens saved to {path}"
        assert path.stat().st_size > 1000
    assert (tmp_path / "strip.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert page.save_file(str(tmp_path / "strip.csv")).startswith("Logit lens saved")
    with open(tmp_path / "strip.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == lens.layers * len(lens.tokens)
    row = rows[len(lens.tokens) + 1]  # layer 2, step 2
    assert (row["layer"], row["step"], row["chosen"]) == ("2", "2", lens.tokens[1])
    assert row["top_token"] == lens.top_tokens[1, 1, 0] and row["top_language"] == lens.top_language[1, 1]
    assert float(row["p_chosen"]) == pytest.approx(float(lens.chosen_prob[1, 1]))
    assert int(row["rank"]) == lens.chosen_rank[1, 1]
    assert page.save_file(str(tmp_path / "strip.json")).startswith("Logit lens saved")
    data = json.loads((tmp_path / "strip.json").read_text(encoding="utf-8"))
    assert data["model"]["name"] == "de-en-multi30k" and data["languages"] == list(LANGUAGES)
    assert "heuristic" in data["language_guess"] and len(data["cells"]) == len(rows)
    assert page.save_file(str(tmp_path / "strip.txt")) == ("Cannot export strip.txt: name a .png, .svg, .pdf, .csv "
                                                           "or .json file.")
    assert page.save_file(str(tmp_path / "missing" / "strip.csv")).startswith(
        f"Cannot save {tmp_path / 'missing' / 'strip.csv'}: ")


def test_the_strip_of_a_random_llm(qtbot, window, tmp_path):
    pytest.importorskip("transformers")
    from tests.llm_folder import make_llm_folder

    tab = load(qtbot, window, str(make_llm_folder(tmp_path, "qwen2")))
    window.resize(*SIZES[0])
    qtbot.waitUntil(lambda: (window.width(), window.height()) == SIZES[0], timeout=3000)
    tab.playback.max_len_spin.setValue(8)
    translate(qtbot, window, "Der Mann sieht den Hund.")
    page = tab.quantity.lens
    tab.search.side.setCurrentWidget(page.widget)
    qtbot.waitUntil(lambda: page.lens is not None, timeout=30000)
    page.strip_button.click()
    qtbot.waitUntil(lambda: page.strip.isVisible(), timeout=5000)
    lens = page.lens
    assert lens.layers == tab.quantity.lens.translator.config.dec_layers and len(lens.tokens) == len(tab.document.steps)
    assert page.strip.cell_at(page.strip.cell_rect(lens.layers - 1, 0).center().toPoint()) == (lens.layers - 1, 0)
    if os.environ.get("ATTNVIZ_SHOTS"):  # random weights: the tokens mean nothing, the layout is what is shown
        window.grab().save(os.path.join(os.environ["ATTNVIZ_SHOTS"], "llm-lens-strip-qwen2-tiny-random-1366x768.png"))
