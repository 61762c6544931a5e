"""The Translate tab at a laptop's size (issue 25's QA walk at 1024x700): every attention selector shows its whole
text ("Cross-attenti", "Mean of |", "Fixed sca" were cut), the selectors wrapping to a second row when the map's
column is narrow, and the translated text with its Copy button stays in sight, not scrolled under the strips."""

import os
from pathlib import Path

import pytest
from PySide6.QtCore import QRect

from tests.gui.conftest import load, translate

MODELS = Path(__file__).resolve().parents[2] / "models"
SENTENCE = "Ein kleines Mädchen in einem rosa Kleid klettert eine Treppe zu einem Spielhaus hinauf ."


def in_sight(widget) -> bool:
    """The whole widget is drawn: no ancestor (a scroll area, the window) clips any of it."""
    return widget.isVisible() and widget.visibleRegion().boundingRect() == QRect(0, 0, widget.width(),
                                                                                  widget.height())


@pytest.mark.parametrize("size", [(1024, 700), (1366, 768), (1920, 1080)])
@pytest.mark.usefixtures("app_style")  # the app's stylesheet, as in the README's screenshots this test takes
def test_selectors_and_the_translated_text_show_whole(qtbot, window, size):
    tab = load(qtbot, window, str(MODELS / "de-en-multi30k.safetensors"))
    window.resize(*size)
    qtbot.waitUntil(lambda: (window.width(), window.height()) == size, timeout=3000)
    translate(qtbot, window, SENTENCE)
    qtbot.waitUntil(lambda: window.minimumSizeHint().width() <= size[0])
    panel = tab.attention
    for combo in (panel.kind_combo, panel.layer_combo, panel.head_combo, panel.scale_combo):
        assert combo.width() >= combo.sizeHint().width(), (size, combo.objectName(), combo.currentText())
        assert in_sight(combo), (size, combo.objectName())
    for widget in (tab.translation_text.edit, tab.translation_text.copy_button):
        assert in_sight(widget), (size, widget.objectName())
    assert tab.translation_text.edit.text()  # the translation is there to copy
    if os.environ.get("ATTNVIZ_SHOTS"):
        qtbot.waitUntil(lambda: tab.quantity.suspect.found is not None, timeout=30000)  # the verdict in the shot
        qtbot.wait(100)  # and the side column refitted to it
        window.grab().save(os.path.join(os.environ["ATTNVIZ_SHOTS"], f"translate-{size[0]}x{size[1]}.png"))
