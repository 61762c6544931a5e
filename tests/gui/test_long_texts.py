"""No text raises the window's minimum width past a 1024 px screen (issue 25's QA walk: the Analysis tab's
"Compare with: de-en-lstm-multi30k.safetensors" took it from 1002 to 1193 px): chosen files are elided with the
whole path in the tooltip, messages wrap, and a long model name (picked, loading, in use) is cut, not laid out
whole."""

import os
from pathlib import Path

from attnviz.gui.analysis.tab import AnalysisTab
from attnviz.gui.translate.tab import TranslateTab

LONG = "a-checkpoint-with-a-very-long-name-from-a-sweep-lr0.0005-warmup4000-epoch-0042-of-0100"
MESSAGE = ("missing data in /tmp/no/such/folder/with/a/quite/long/name/for/testing/the/message/wrapping: "
           "multi30k_train.de.gz, multi30k_train.en.gz. Download the corpus into it, or choose a data folder.")
LIMIT = 1024


def test_long_texts_do_not_widen_the_window(qtbot, loaded, tmp_path, trained_translator):
    window = loaded
    window.resize(1000, 700)
    assert window.minimumSizeHint().width() <= LIMIT  # as it starts
    path = tmp_path / "runs" / (LONG + ".safetensors")
    path.parent.mkdir()
    trained_translator.save(path, name=LONG)
    analysis: AnalysisTab = window.analysis_tab
    analysis.set_compare(str(path))
    analysis.gold.set_path(str(tmp_path / (LONG + "-gold-alignments.txt")))
    assert LONG in analysis.compare_button.toolTip() and str(path) in analysis.compare_button.toolTip()
    analysis.set_files(str(tmp_path / (LONG + ".de.txt")), str(tmp_path / (LONG + ".en.txt")))
    analysis.head_title.setText(f"<b>The analysis failed:</b> {MESSAGE}")
    analysis.sentence_views.quantity.setText(f"<b>The views failed:</b> {MESSAGE}")
    window.statusBar().showMessage(MESSAGE)
    window.data_folder.set_path(str(tmp_path / LONG / LONG))
    window.load_model(str(path))  # its name on the picker, the Translate button and the status bar while it loads
    tab: TranslateTab = window.translate_tab
    assert LONG in tab.translate_button.text() or LONG in window.model_label.text()
    for index in range(window.tabs.count()):
        window.tabs.setCurrentIndex(index)
        assert window.minimumSizeHint().width() <= LIMIT, (window.tabs.tabText(index), "loading")
    qtbot.waitUntil(lambda: window.translator is not None and window.translator.metadata["path"] == str(path),
                    timeout=20000)
    for index in range(window.tabs.count()):
        window.tabs.setCurrentIndex(index)
        assert window.minimumSizeHint().width() <= LIMIT, (window.tabs.tabText(index), "loaded")
    assert Path(window.model_combo.currentData()) == path
    if os.environ.get("ATTNVIZ_SHOTS"):
        window.resize(1024, 700)
        window.tabs.setCurrentWidget(analysis)
        qtbot.waitUntil(lambda: window.width() == 1024)
        window.grab().save(os.path.join(os.environ["ATTNVIZ_SHOTS"], "long-texts-analysis-1024x700.png"))
