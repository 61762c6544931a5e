"""Start never destroys a trained model silently; the data folder follows ATTNVIZ_DATA and a corrected folder clears
the "missing" message at once; every hyperparameter explains itself."""

import pytest

from attnviz.gui.train import guard as train_guard
from attnviz.gui.train.guard import CANCEL, FRESH, OVERWRITE, choose_output, fresh_path, run_files
from attnviz.gui.train.recipe_form import RecipeForm


def touch(path):
    path.write_bytes(b"x")
    return path


def test_a_new_path_needs_no_question(tmp_path):
    asked = []
    out = str(tmp_path / "run.safetensors")
    assert choose_output(None, out, None, ask=lambda *a: asked.append(a)) == out and not asked


@pytest.mark.parametrize("answer, expected", [(OVERWRITE, "run.safetensors"), (FRESH, "run-2.safetensors"),
                                              (CANCEL, None)])
def test_an_existing_run_asks_overwrite_fresh_or_cancel(tmp_path, answer, expected):
    touch(tmp_path / "run.last.safetensors")  # any file of the run counts, not only the best checkpoint
    asked = []

    def ask(parent, title, text, choices):
        asked.append((text, choices))
        return answer

    chosen = choose_output(None, str(tmp_path / "run.safetensors"), None, ask=ask)
    assert chosen == (None if expected is None else str(tmp_path / expected))
    assert asked[0][1] == [FRESH, OVERWRITE, CANCEL] and "run.last.safetensors" in asked[0][0]


def test_the_model_open_for_translation_is_never_offered_for_overwriting(tmp_path):
    best = touch(tmp_path / "run.safetensors")
    touch(tmp_path / "run-2.safetensors")
    asked = []
    chosen = choose_output(None, str(best), str(best), ask=lambda p, t, text, choices: asked.append(choices) or FRESH)
    assert asked == [[FRESH, CANCEL]] and chosen == str(tmp_path / "run-3.safetensors")
    assert fresh_path(best) == str(tmp_path / "run-3.safetensors")
    assert [p.name for p in run_files(best)] == ["run.safetensors"]


def test_start_on_the_open_model_trains_into_a_fresh_name(qtbot, window, data_dir, tmp_path):
    tab = window.train_tab
    form = tab.form
    form.preset_combo.setCurrentIndex(form.preset_combo.findData("multi30k-de-en"))
    form.data_edit.setText(str(data_dir))
    best = touch(tmp_path / "model.safetensors")
    form.out_edit.setText(str(best))
    tab.protected_path = str(best)
    launched = []
    tab._launch = lambda job, out: launched.append(out)
    tab.ask_output = lambda parent, title, text, choices: CANCEL
    tab.start()
    assert launched == [] and "kept" in tab.message.text() and best.read_bytes() == b"x"
    tab.ask_output = lambda parent, title, text, choices: FRESH
    tab.start()
    assert launched == [str(tmp_path / "model-2.safetensors")] and form.output_path() == launched[0]


def test_the_data_folder_follows_attnviz_data_and_a_fix_clears_the_message(qtbot, window, data_dir, tmp_path,
                                                                            monkeypatch, settings):
    tab = window.train_tab
    settings.setValue("train/data_dir", str(tmp_path / "old"))
    monkeypatch.setenv("ATTNVIZ_DATA", str(data_dir))
    form = RecipeForm()
    qtbot.addWidget(form)
    form.restore_settings(settings)
    assert form.data_dir() == str(data_dir)  # the environment wins over the remembered folder

    form = tab.form
    form.preset_combo.setCurrentIndex(form.preset_combo.findData("multi30k-de-en"))
    form.data_edit.setText(str(tmp_path / "empty"))
    tab.start()
    assert "missing" in tab.message.text() and not tab.is_running()
    form.data_edit.setText(str(data_dir))  # corrected: the message goes at once, before pressing Start
    assert tab.message.isHidden() and tab.download_button.isHidden()


def test_every_setting_has_a_one_line_explanation(qtbot):
    form = RecipeForm()
    qtbot.addWidget(form)
    for index in range(form.preset_combo.count()):
        form.preset_combo.setCurrentIndex(index)
        for row in range(form.table.rowCount()):
            name = form.table.item(row, 0)
            assert name.toolTip() and "\n" not in name.toolTip(), name.text()


def test_stop_confirmation_defaults_to_no():
    asked = []
    assert train_guard.confirm_stop(None, paused=False, confirm=lambda *a: asked.append(a) or False) is False
    assert "checkpoint is saved" in asked[0][2]
    assert train_guard.confirm_stop(None, paused=True, confirm=lambda *a: 1 / 0) is True
