"""Word alignment from a decoder-only LLM's attention: the sentence's span of the prompt, renormalised, words from
byte-level BPE pieces, scored by AER; the attention is set by hand through the ``dec.{l}.self.weights`` probe
points so the expected links are known."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnviz.engine.analysis.alignment import AlignmentReady, align_steps
from attnviz.engine.analysis.llm_words import SPAN_NOTE, llm_examples, pieces_to_words, prompted_the_other_way
from attnviz.engine.analysis.setwords import TokenReport
from attnviz.engine.errors import InputError
from attnviz.engine.loading import load_translator
from attnviz.engine.models.probes import edit
from tests.llm_folder import make_llm_folder

pytest.importorskip("transformers")
SOURCES = (("Der", "Hund", "läuft", "schnell", "."), ("Eine", "Katze", "sieht", "den", "roten", "Mann", "!"))
TARGETS = (("The", "dog", "runs", "quickly", "."), ("A", "cat", "sees", "the", "red", "man", "!"))
LINKS = ({(0, 0), (1, 1), (2, 2), (3, 3), (4, 4)}, {(0, 0), (1, 1), (2, 2), (3, 3), (5, 4), (4, 5), (6, 6)})


@pytest.fixture(scope="module")
def llm(tmp_path_factory):
    return load_translator(make_llm_folder(tmp_path_factory.mktemp("qwen2"), "qwen2"), "float32")


def _aligned(llm, links=LINKS, template_weight=0.6):
    """Every output row of every layer puts ``template_weight`` on the prompt's first token (a template token) and
    the rest on the first piece of the source word the target word's gold link names; the passes are told apart by
    their prompt's width."""
    examples = llm_examples(llm, SOURCES, TARGETS, None)[0]
    rows = {}
    for (example, tgt, src, first), pair in zip(examples, links, strict=True):
        to_src = {j: i for i, j in pair}
        columns = [first + src.word_of.index(to_src[j]) for j in tgt.word_of]  # row t predicts target token t
        rows[len(example.src) - 1] = columns

    def set_rows(weights: torch.Tensor) -> torch.Tensor:
        t = weights.size(-2)
        columns = rows[weights.size(-1) - t]
        out = torch.zeros_like(weights)
        out[..., :, 0] = template_weight
        for q, column in enumerate(columns):
            out[..., q, column] += 1 - template_weight
        out[..., len(columns):, 0] = 1.0  # the <eos> row
        return out

    with edit(llm.model, {"dec.*.self.weights": set_rows}):
        return list(align_steps(llm, SOURCES, TARGETS, [(p, set()) for p in LINKS], batch_size=1))[-1]


def test_pieces_belong_to_the_words_their_characters_overlap():
    ranges = [(0, 3), (4, 8), (9, 10)]  # "Der Hund ."
    word_of, covered = pieces_to_words([(0, 3), (3, 6), (6, 8), (8, 9), (9, 10)], ranges)
    assert word_of == [0, 1, 1, 2, 2]  # " Hu" joins Hund, a lone space the word after it
    assert covered[1] == [1] and pieces_to_words([(2, 5)], ranges)[1] == [[0, 1]]


def test_span_pieces_map_onto_the_set_words(llm):
    report = TokenReport()
    examples, spans, prompts = llm_examples(llm, SOURCES, TARGETS, report)
    for (example, tgt, src, first), span, prompt, words, target in zip(examples, spans, prompts, SOURCES, TARGETS,
                                                                        strict=True):
        assert first == span[0] and len(src.tokens) == span[1] - span[0] and src.n_words == len(words)
        assert sorted(set(src.word_of)) == list(range(len(words))) and list(src.word_of) == sorted(src.word_of)
        assert llm.detokenize(list(src.tokens)).strip() == " ".join(words)  # the span is the sentence, no more
        assert " ".join(words) in prompt and prompt.index(" ".join(words)) > 0
        assert example.tgt[1:-1] == tuple(llm.target_ids(" ".join(target)))  # the reference, the LLM's tokens
        assert tgt.tokens == tuple(llm.reference_tokens(" ".join(target))) and tgt.n_words == len(target)
    assert report.words == sum(map(len, SOURCES + TARGETS)) and not report.unread


def test_hand_made_attention_gives_the_gold_links_whatever_the_template_holds(llm):
    ready = _aligned(llm)
    assert isinstance(ready, AlignmentReady)
    assert ready.aer_heads.shape == (3, 4) and np.allclose(ready.aer_heads, 0.0) and ready.aer_average == 0.0
    assert [set(map(tuple, (map(int, link.split("-")) for link in line.split()))) for line in ready.alignments] \
        == list(LINKS)
    assert ready.scores["diagonal"]["aer"] == pytest.approx(1 - 10 / 12, abs=1e-4)  # 2 of 12 links off the diagonal
    assert ready.settings["attention"] == SPAN_NOTE and ready.settings["spans"][0][0] > 0


def test_one_wrong_link_per_sentence_gives_the_expected_error_rate(llm):
    wrong = ({(0, 0), (1, 1), (2, 2), (4, 3), (4, 4)}, {(0, 0), (1, 1), (2, 2), (3, 3), (4, 4), (4, 5), (6, 6)})
    ready = _aligned(llm, wrong, template_weight=0.9)  # the template's weight is never a link, however large
    # 12 predicted, 12 sure gold links, 10 shared: precision = recall = 10/12, AER = 1 - 20/24
    assert ready.aer_average == pytest.approx(1 - 20 / 24)
    assert ready.scores["method"]["precision"] == pytest.approx(10 / 12, abs=1e-4)


def test_reverse_by_prompting_the_other_way_and_its_refusals(llm):
    other = prompted_the_other_way(llm)
    assert (other.src_spec.lang, other.tgt_spec.lang) == (llm.tgt_spec.lang, llm.src_spec.lang)
    assert other.model is llm.model and (llm.src_spec.lang, llm.tgt_spec.lang) == ("de", "en")
    ready = list(align_steps(llm, SOURCES, TARGETS, [(p, set()) for p in LINKS], reverse=other))[-1]
    assert {"grow-diag-final", "intersection", "union", "reverse model"} <= set(ready.scores)
    assert ready.settings["reverse_prompt_languages"] == ["en", "de"]
    llm.set_prompt("Translate: {text}\nTranslation:")
    try:
        with pytest.raises(InputError, match="names no language"):
            prompted_the_other_way(llm)
    finally:
        llm.set_prompt(None)


def test_batches_of_mixed_prompt_lengths_align_as_one_by_one(llm):
    gold = [(p, set()) for p in LINKS]
    one = list(align_steps(llm, SOURCES, TARGETS, gold, batch_size=1))[-1]
    both = list(align_steps(llm, SOURCES, TARGETS, gold, batch_size=2))[-1]
    assert one.alignments == both.alignments
    np.testing.assert_allclose(one.aer_heads, both.aer_heads)


def test_a_window_that_cannot_reach_the_span_links_nothing(tmp_path):
    gemma3 = load_translator(make_llm_folder(tmp_path, "gemma3"), "float32")  # window 6 on layers 1 and 3
    examples, spans, _ = llm_examples(gemma3, SOURCES, TARGETS, None)
    assert all(len(e.src) - 1 - last >= 6 for (e, *_), (_, last) in zip(examples, spans, strict=True))
    ready = list(align_steps(gemma3, SOURCES, TARGETS, [(p, set()) for p in LINKS]))[-1]
    assert np.all(ready.aer_heads[[0, 2]] == 1.0) and np.all(ready.aer_heads[1] < 1.0)
    assert ready.settings["windowed_layers"] == [1, 3] and ready.settings["window"] == 6
