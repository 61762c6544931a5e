"""The Translate tab with the other model kinds: an LSTM shows only cross-attention; a language model turns the tab
into Generate (prefix, greedy or sampled with a seed, masked self-attention only)."""

import pytest

from attnviz.engine.config import DecodeConfig
from tests.gui.conftest import load, translate
from tests.helpers import make_toy_lm, make_toy_translator, train_toy, train_toy_lm


@pytest.fixture(scope="module")
def lm_checkpoint(tmp_path_factory):
    translator = make_toy_lm(seed=2)
    train_toy_lm(translator, steps=400)
    path = tmp_path_factory.mktemp("lm") / "letters.safetensors"
    translator.save(path, name="letters")
    return str(path)


@pytest.fixture(scope="module")
def rnn_checkpoint(tmp_path_factory):
    translator = make_toy_translator(seed=3, kind="rnn-attention")
    train_toy(translator, steps=300, lr=5e-3)
    path = tmp_path_factory.mktemp("rnn") / "lstm.safetensors"
    translator.save(path, name="lstm")
    return str(path)


def kinds(tab):
    combo = tab.attention.kind_combo
    return [combo.itemData(i) for i in range(combo.count())]


def test_a_language_model_turns_the_tab_into_generate(qtbot, window, lm_checkpoint, toy_checkpoint):
    tab = load(qtbot, window, lm_checkpoint)
    assert window.tabs.tabText(0) == "Genera&te" and tab.translate_button.text() == "Gener&ate"
    assert not tab.source_view.isVisible() and tab.sampling_row.isVisible()
    tab.sampling_combo.setCurrentIndex(0)  # greedy
    translate(qtbot, window, "cd")
    tokens = tab.output_view.tokens()
    assert tokens[:3] == ["c", "d", "e"] and tokens[-1] == "<eos>"
    assert [tab.step_model.index(i, 1).data() for i in range(2)] == ["c (forced)", "d (forced)"]
    assert kinds(tab) == ["decoder"]
    data = tab.attention.heatmap.data()
    assert data.matrix.shape == (len(tokens), len(tokens)) and abs(data.matrix.sum(axis=1) - 1).max() < 1e-5
    assert abs(data.matrix[0, 1:]).max() == 0  # causal: the first step sees only <sos>
    tab = load(qtbot, window, toy_checkpoint)  # back to a translation model
    assert window.tabs.tabText(0) == "&Translate" and tab.source_view.isVisible() and tab.sampling_row.isVisible()
    assert not tab.temperature_spin.isVisible()  # sampling is offered for a language model only


def test_generate_accepts_an_empty_prefix_and_samples_reproducibly(qtbot, window, lm_checkpoint):
    tab = load(qtbot, window, lm_checkpoint)
    tab.sampling_combo.setCurrentIndex(1)
    tab.temperature_spin.setValue(2.0)
    tab.seed_spin.setValue(40)
    outputs = []
    for seed in (40, 41, 40):
        tab.seed_spin.setValue(seed)
        translate(qtbot, window, "")
        assert tab.seed_spin.value() == seed + 1  # the seed advances after each sample
        outputs.append(tab.document.translation(-1).text)
    assert outputs[0] == outputs[2] and not tab.message.isVisible()
    expected = tab.translator.translate("", DecodeConfig(temperature=2.0, seed=40)).text
    assert outputs[0] == expected


def test_an_lstm_offers_only_its_one_cross_attention_map(qtbot, window, rnn_checkpoint):
    tab = load(qtbot, window, rnn_checkpoint)
    assert window.tabs.tabText(0) == "&Translate"
    translate(qtbot, window, "q1 q2 q3")
    assert kinds(tab) == ["cross"]
    assert tab.attention.layer_combo.count() == 1
    panel = tab.attention  # one layer and one head: nothing to choose, and the map is that head's, not a "mean"
    assert not panel.layer_combo.isEnabled() and not panel.head_combo.isEnabled()
    assert panel.head == 0 and "head 1" in panel.caption.text()
    data = tab.attention.heatmap.data()
    assert data.matrix.shape == (len(tab.output_view.tokens()), 5)
    assert abs(data.matrix.sum(axis=1) - 1).max() < 1e-5
