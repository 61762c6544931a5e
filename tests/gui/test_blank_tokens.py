"""A token made of white space (a character model's space) is shown as a visible glyph, never as nothing: in the
unknown-word warning, the token chips, the step table, the map's labels and the top-k chart."""

import dataclasses
import os

import pytest
from PySide6.QtCore import Qt

from attnviz.engine.config import DecodeConfig
from attnviz.engine.events import DecodeStep, EncoderPass
from attnviz.engine.loading import load_translator
from attnviz.engine.text.tokenize import visible_token
from attnviz.gui.translate.step_model import StepTableModel
from attnviz.gui.translate.tokens import TokenStrip
from attnviz.gui.translate.topk import TopKView
from attnviz.paths import models_dir
from attnviz.session.translate.document import DecodeDocument, DecodeRequest

SPACE = "\u2423"


def test_visible_token():
    assert visible_token(" ") == SPACE and visible_token(" ", named=True) == f"{SPACE} (space)"
    assert visible_token("\t", named=True) == "\u21e5 (tab)" and visible_token("a b") == f"a{SPACE}b"
    assert visible_token("a b", named=True) == f"a{SPACE}b"  # only a lone blank is named
    assert visible_token("\u2003", named=True) == f"{SPACE} (white space)"
    assert visible_token("Haus") == "Haus" and visible_token("") == "" and visible_token("<unk>") == "<unk>"


def test_an_unknown_space_is_listed_visibly():
    path = models_dir() / "names-char.safetensors"
    if not path.exists():
        pytest.skip("the bundled character model is not here")
    encoder = next(load_translator(path).steps("an na", DecodeConfig(max_len=4)))
    assert encoder.warnings == (f"Not in the model's vocabulary (read as <unk>): {SPACE} (space)",)


def feed_spaced(doc: DecodeDocument, translator) -> None:
    """``doc`` fed a real decode whose second source token and first output token (and runner-up) are a space."""
    doc.start(DecodeRequest("q1 q2", DecodeConfig(), False), translator.detokenize)
    events = list(translator.steps("q1 q2", DecodeConfig()))
    src = list(events[0].src_tokens)
    src[1] = " "
    doc.add(EncoderPass(tuple(src), events[0].encoder_attention, events[0].warnings))
    first: DecodeStep = events[1]
    doc.add(dataclasses.replace(first, token=" ", topk=(first.topk[0], (" ", first.topk[1][1])) + first.topk[2:]))
    for event in events[2:]:
        doc.add(event)
    doc.finish()


def test_a_space_token_is_visible_in_every_view(qtbot, trained_translator):
    doc = DecodeDocument()
    table = StepTableModel(doc)
    feed_spaced(doc, trained_translator)
    assert table.data(table.index(0, 1), Qt.ItemDataRole.DisplayRole) == SPACE
    assert table.data(table.index(0, 4), Qt.ItemDataRole.DisplayRole).startswith(f"{SPACE} (")
    _, rows, cols, _ = doc.heatmap("cross", 0, None, len(doc.steps) - 1)
    assert rows[0] == SPACE and cols[1] == SPACE
    _, rows, cols, _ = doc.heatmap("decoder", 0, None, len(doc.steps) - 1)
    assert cols[1] == SPACE  # the decoder reads the space it chose
    strip = TokenStrip("")
    qtbot.addWidget(strip)
    strip.set_tokens(doc.src_tokens)
    assert strip.accessible_value().split()[1] == SPACE and strip.tokens()[1] == " "  # shown, not changed
    topk = TopKView()
    qtbot.addWidget(topk)
    topk.resize(300, 200)
    candidates = ((" ", 0.6), ("q1", 0.3), ("q2", 0.1))
    topk.set_candidates(candidates, 1.0, candidates[0])
    assert f"Chosen: {SPACE} (" in topk.accessible_value() and topk.toolTip().startswith(f"{SPACE}: ")
    topk.grab()  # painted: its rows are laid out
    assert topk.token_at(topk._rows[0].center()) == " "  # a what-if still takes the token itself
    if os.environ.get("ATTNVIZ_SHOTS"):
        strip.resize(300, 40)
        strip.grab().save(os.path.join(os.environ["ATTNVIZ_SHOTS"], "space-strip.png"))
        topk.grab().save(os.path.join(os.environ["ATTNVIZ_SHOTS"], "space-topk.png"))
