"""The Source strip of an LLM: the template's and the instruction's runs folded into one chip each, hovering a
folded chip shades the outputs by the attention its run holds, and pieces shown as words are written."""

from __future__ import annotations

import numpy as np
import pytest

from attnviz.engine.text.tokenize import piece_label, piece_text
from attnviz.gui.translate.step_views import fold_prompt

TOKENS = ("<bos>", "<start>", "user", "\u2581Translate", "\u2581into", ":", "\u2581Der", "\u2581Hund", ".", "<end>")
ROLES = ("template", "template", "template", "instruction", "instruction", "instruction", "source", "source",
         "source", "template")


def test_each_run_of_template_or_instruction_is_one_chip():
    labels, roles, groups = fold_prompt(TOKENS, ROLES)
    assert labels == ["template\u00d73", "instruction\u00d73", "\u2581Der", "\u2581Hund", ".", "template\u00d71"]
    assert roles == ["template", "instruction", "source", "source", "source", "template"]
    assert groups == [range(0, 3), range(3, 6), range(6, 7), range(7, 8), range(8, 9), range(9, 10)]
    assert [i for g in groups for i in g] == list(range(len(TOKENS)))  # every position in exactly one chip


def test_a_prompt_of_the_sentence_alone_folds_nothing():
    labels, roles, groups = fold_prompt(("a", "b"), ("source", "source"))
    assert labels == ["a", "b"] and groups == [range(0, 1), range(1, 2)] and fold_prompt((), ()) == ([], [], [])


@pytest.mark.parametrize(("token", "text", "starts", "label"), [
    ("\u2581man", "man", True, "\u00b7man"),
    ("ing", "ing", False, "ing"),
    ("\u2581", "\u2581", False, "\u2581"),  # a lone mark is a space piece, kept
    ("<bos>", "<bos>", False, "<bos>"),
    (" ", " ", False, "\u2423"),  # a space stays visible
])
def test_pieces_read_as_words_with_a_quiet_word_start(token, text, starts, label):
    assert piece_text(token) == (text, starts) and piece_label(token) == label


def test_the_strip_follows_sentence_only_and_a_folded_chip_sums_its_run(qtbot, window, tmp_path):
    from tests.gui.conftest import load, translate
    from tests.llm_folder import make_llm_folder

    tab = load(qtbot, window, str(make_llm_folder(tmp_path, "qwen2")))
    tab.sampling_combo.setCurrentIndex(0)  # greedy: Max length holds (the folder's own decoding has its own)
    tab.playback.max_len_spin.setValue(1)  # one step: the layer is picked at the first output rows, as here
    translate(qtbot, window, "Der Hund läuft.")
    encoder, strip = tab.document.encoder, tab.source_view
    from attnviz.session.attention.source import peaked_layer

    shown = tab.quantity.source().maps("cross", 0)  # no layer chosen: the most peaked one at the first row
    assert shown.shape[0] > 1 and tab.attention.layer == peaked_layer(shown)
    assert tab.quantity.bar.span_check.isChecked() and len(strip.tokens()) < len(encoder.src_tokens)
    first = strip.tokens()[0]
    assert first.startswith("template\u00d7") and int(first[len("template\u00d7"):]) == \
        encoder.roles.index("instruction")
    seen: list[np.ndarray] = []
    original = tab.output_view.set_weights
    tab.output_view.set_weights = lambda w: (seen.append(None if w is None else np.asarray(w)), original(w))[1]
    tab.step_views._on_source_hovered(0)  # the template chip: the outputs shaded by the run's summed attention
    run = range(0, encoder.roles.index("instruction"))
    doc, panel = tab.document, tab.attention
    summed = np.sum([doc.cross_column(i, doc.current, panel.layer, panel.head) for i in run], axis=0)
    np.testing.assert_allclose(seen[-1], summed / summed.max(), rtol=1e-5)
    tab.quantity.bar.span_check.setChecked(False)
    assert strip.tokens() == list(encoder.src_tokens)


def test_the_most_peaked_layer_is_the_one_whose_rows_pick_out_a_few_columns():
    from attnviz.session.attention.source import peaked_layer

    even = np.full((2, 3, 4), 0.25)  # [H, R, C]: every row spread evenly
    sharp = np.zeros((2, 3, 4))
    sharp[..., 1] = 1.0  # every row on one column
    assert peaked_layer(np.stack([even, sharp, even])) == 1
    assert peaked_layer(np.stack([sharp, even])) == 0


def test_a_narrow_top_k_chart_shows_whole_words(qtbot):
    from attnviz.gui.translate.topk import TopKView

    view = TopKView()
    qtbot.addWidget(view)
    view.set_candidates([("\u2581langsam", 0.014), ("\u2581schnell", 0.01)], 5.9, ("\u2581langsam", 0.014))
    assert view.label_text("\u2581langsam", 150) == "\u00b7langsam"  # a two-column cell at 1366x768 in beam mode
    assert "\u2026" in view.label_text("\u2581" + "x" * 60, 150)  # what cannot fit is elided
