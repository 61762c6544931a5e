"""The attention panel follows its decode document itself: each step shown, new encoder pass and clearing redraws
it from the source it was given, with no tab or controller pushing it."""

import numpy as np

from attnviz.engine.config import DecodeConfig
from attnviz.gui.attention.panel import AttentionPanel
from attnviz.session.translate.document import DecodeDocument, DecodeRequest
from attnviz.session.translate.quantity_source import QuantitySource


def test_the_panel_redraws_at_each_step_the_document_shows(qtbot, trained_translator):
    panel = AttentionPanel()
    qtbot.addWidget(panel)
    doc = DecodeDocument()
    asked = []
    panel.follow(doc, lambda: asked.append(doc.current) or QuantitySource(doc, None))
    text, decode = "q1 q2 q3", DecodeConfig()
    doc.start(DecodeRequest(text, decode, False), trained_translator.detokenize)
    assert panel.heatmap.data() is None  # cleared: nothing to show yet
    doc.add_all(list(trained_translator.steps(text, decode)))
    doc.finish()
    panel.select(kind="cross", layer=1, head=None)
    for step in (0, 2, 1):
        doc.go_to(step)
        expected, rows, _, _ = doc.heatmap("cross", 1, None, step)
        np.testing.assert_allclose(panel.heatmap.data().matrix, expected)
        assert panel.heatmap.data().matrix.shape[0] == step + 1
    assert asked[-3:] == [0, 2, 1]  # the source was asked at each step, by the panel itself
    doc.start(DecodeRequest(text, decode, False), trained_translator.detokenize)
    assert panel.heatmap.data() is None  # a new decode clears the map
