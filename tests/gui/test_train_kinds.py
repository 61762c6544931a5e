"""Training the other model kinds from the Train tab, on small slices of the real corpora."""

import numpy as np
import pytest

from tests.gui.test_train_tab import set_settings

pytestmark = pytest.mark.timeout(600)  # whole trainings, each waited on for up to 180 s


def prepare(window, data_dir, tmp_path, preset: str, settings: dict[str, str]):
    tab = window.train_tab
    window.tabs.setCurrentWidget(tab)
    form = tab.form
    form.preset_combo.setCurrentIndex(form.preset_combo.findData(preset))
    form.data_edit.setText(str(data_dir))
    form.out_edit.setText(str(tmp_path / f"{preset}.safetensors"))
    set_settings(form, settings)
    assert form.is_valid(), form.error_label.text()
    return tab


def offered(form) -> set[str]:
    return {form.table.item(row, 0).text() for row in range(form.table.rowCount())}


def run(qtbot, tab):
    tab.start()
    qtbot.waitUntil(lambda: not tab.is_running(), timeout=180000)
    assert tab.message.isHidden(), tab.message.text()
    return [float(tab.eval_table.item(r, 2).text()) for r in range(tab.eval_table.rowCount())]


def test_names_char_trains_and_opens_in_generate(qtbot, window, data_dir, tmp_path):
    tab = prepare(window, data_dir, tmp_path, "names-char",
                  {"train.epochs": "2", "corpus.limit": "600", "train.batch_size": "32", "model.dec_layers": "2",
                   "train.threads": "1"})
    assert "train.teacher_forcing" not in offered(tab.form) and "model.heads" in offered(tab.form)
    losses = run(qtbot, tab)
    assert len(losses) == 2 and losses[1] < losses[0]
    assert tab.eval_table.item(1, 5).text() == "\u2014"  # no BLEU for a language model
    assert tab.curves.bleu.xs == [] and len(tab.curves.val_loss.xs) == 2
    assert "no BLEU" in tab.curves.bleu_plot.empty_text
    probe = tab.forming.snapshots[-1].probe
    assert set(probe.attention) == {"decoder"} and probe.text.startswith("mar")
    tab.eval_table.selectRow(1)
    assert "Sampled" in tab.samples_view.toHtml()
    tab.open_best_button.click()
    qtbot.waitUntil(lambda: window.translator is not None and not window.translator.has_source, timeout=20000)
    assert window.tabs.tabText(0) == "Genera&te"


def test_lstm_trains_with_teacher_forcing(qtbot, window, data_dir, tmp_path):
    tab = prepare(window, data_dir, tmp_path, "multi30k-de-en-lstm",
                  {"train.epochs": "2", "corpus.limit": "300", "model.d_model": "32", "model.hidden": "48",
                   "train.batch_size": "32", "train.bleu_sentences": "20", "train.threads": "1"})
    keys = offered(tab.form)
    assert {"train.teacher_forcing", "model.hidden", "model.score"} <= keys and "model.heads" not in keys
    losses = run(qtbot, tab)
    assert len(losses) == 2 and losses[1] < losses[0]
    cross = tab.forming.snapshots[-1].probe.attention["cross"]
    assert cross.shape[:2] == (1, 1) and np.allclose(cross.sum(-1), 1.0, atol=1e-5)
    forming = tab.forming  # one layer, one head: that head is shown and there is nothing to choose
    assert forming.layer_combo.count() == 1 and forming.head_combo.currentText() == "Head 1"
    assert not forming.layer_combo.isEnabled() and not forming.head_combo.isEnabled()


@pytest.mark.parametrize("value,message", [("1.5", "teacher_forcing"), ("-0.1", "teacher_forcing")])
def test_a_bad_teacher_forcing_ratio_is_refused(window, data_dir, tmp_path, value, message):
    tab = prepare(window, data_dir, tmp_path, "multi30k-de-en-lstm", {})
    set_settings(tab.form, {"train.teacher_forcing": value})
    assert not tab.form.is_valid() and message in tab.form.error_label.text()
