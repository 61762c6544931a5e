"""Head statistics: hand-made attention with known figures, tags, corpus means, and a run on a tiny model."""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest
import torch

from attnviz.engine.analysis.run import AnalysisProgress, HeadStatsReady, compute_head_stats, head_stats_steps
from attnviz.engine.analysis.stats import HeadStats, compare_stats, head_tags, row_statistics
from attnviz.engine.text.vocab import EOS_ID, PAD_ID, SOS_ID
from tests.helpers import make_toy_lm, make_toy_translator

WORD, DOT = 4, 5
PUNCT = torch.tensor([False] * 5 + [True, False])  # [V]: id 5 is "."


def _per_sentence(sums, rows):
    return {k: v / rows[:, None, None] for k, v in sums.items()}


def test_encoder_figures_of_identity_and_uniform_heads_with_padding():
    ids = torch.tensor([[SOS_ID, WORD, DOT, EOS_ID], [SOS_ID, WORD, EOS_ID, PAD_ID]])  # [B=2, S=4]
    attn = torch.zeros(2, 1, 2, 4, 4)  # [B, L=1, H=2, S, S]
    attn[0, 0, 0] = torch.eye(4)
    attn[0, 0, 1] = 0.25
    attn[1, 0, 0, :3, :3] = torch.eye(3)
    attn[1, 0, 1, :, :3] = 1 / 3
    attn[1, 0, :, 3] = 7.0  # a pad query's row: must be ignored
    sums, rows = row_statistics(attn, ids != PAD_ID, ids, PUNCT, "encoder")
    assert rows.tolist() == [4, 3]
    s = _per_sentence(sums, rows.float())
    identity, uniform = (0, 0, 0), (0, 0, 1)
    assert s["entropy"][identity] == pytest.approx(0.0)
    assert s["max_weight"][identity] == pytest.approx(1.0)
    assert s["same"][identity] == pytest.approx(1.0)
    assert s["prev"][identity] == pytest.approx(0.0) and s["next"][identity] == pytest.approx(0.0)
    for name in ("sos", "eos", "punct"):
        assert s[name][identity] == pytest.approx(0.25)
    assert s["sink"][identity] == pytest.approx(0.75)
    assert s["entropy"][uniform] == pytest.approx(math.log(4))
    assert s["norm_entropy"][uniform] == pytest.approx(1.0)
    assert s["prev"][uniform] == pytest.approx(3 * 0.25 / 4)
    assert s["next"][uniform] == pytest.approx(3 * 0.25 / 4)
    assert s["entropy"][1, 0, 1] == pytest.approx(math.log(3))  # padded sentence: 3 keys, pad row ignored
    assert s["punct"][1, 0, 1] == pytest.approx(0.0)
    assert s["same"][1, 0, 0] == pytest.approx(1.0)
    assert torch.isnan(s["diag_distance"]).all()


def test_decoder_causal_uniform_rows():
    ids = torch.tensor([[SOS_ID, WORD, WORD, DOT]])  # decoder inputs [B=1, T=4]
    attn = torch.zeros(1, 1, 1, 4, 4)
    for i in range(4):
        attn[0, 0, 0, i, : i + 1] = 1 / (i + 1)
    sums, rows = row_statistics(attn, ids != PAD_ID, ids, PUNCT, "decoder")
    s = _per_sentence(sums, rows.float())
    assert s["entropy"][0, 0, 0] == pytest.approx(sum(math.log(i + 1) for i in range(4)) / 4)
    assert s["norm_entropy"][0, 0, 0] == pytest.approx(3 / 4)  # one key: 0; the other rows: 1
    assert s["sos"][0, 0, 0] == pytest.approx((1 + 1 / 2 + 1 / 3 + 1 / 4) / 4)
    assert s["punct"][0, 0, 0] == pytest.approx(1 / 16)
    assert s["next"][0, 0, 0] == pytest.approx(0.0)


def test_cross_diagonal_distance():
    src = torch.tensor([[SOS_ID, WORD, WORD, WORD, WORD, WORD, EOS_ID]])  # S = 7
    tgt = torch.tensor([[SOS_ID, WORD, WORD, WORD]])  # T = 4: the diagonal is at source 0, 2, 4, 6
    attn = torch.zeros(1, 1, 2, 4, 7)
    for i in range(4):
        attn[0, 0, 0, i, 2 * i] = 1.0  # on the diagonal
        attn[0, 0, 1, i, min(2 * i + 1, 6) if i < 3 else 5] = 1.0  # one token off
    sums, rows = row_statistics(attn, tgt != PAD_ID, src, PUNCT, "cross")
    s = _per_sentence(sums, rows.float())
    assert s["diag_distance"][0, 0, 0] == pytest.approx(0.0)
    assert s["diag_distance"][0, 0, 1] == pytest.approx(1.0)
    assert s["sos"][0, 0, 0] == pytest.approx(0.25) and s["eos"][0, 0, 0] == pytest.approx(0.25)
    assert torch.isnan(s["same"]).all()


def test_tags_follow_the_thresholds():
    base = dict(same=0.1, prev=0.1, next=0.1, sink=0.1, norm_entropy=0.3, max_weight=0.3)
    assert head_tags("encoder", base) == ()
    assert head_tags("encoder", base | {"prev": 0.5}) == ("positional",)
    assert head_tags("decoder", base | {"sink": 0.6, "norm_entropy": 0.9}) == ("sink", "diffuse")
    assert head_tags("cross", base | {"max_weight": 0.7}) == ("aligning",)
    assert head_tags("cross", base | {"max_weight": 0.7, "sink": 0.3}) == ()


def _stats(values: np.ndarray, rows: np.ndarray) -> HeadStats:
    per = {name: values.copy() for name in ("entropy", "norm_entropy", "max_weight", "sos", "eos", "punct", "sink",
                                            "same", "prev", "next", "diag_distance")}
    return HeadStats(tuple(f"s{i}" for i in range(len(rows))), {"encoder": per}, {"encoder": rows})


def test_corpus_means_weight_sentences_by_rows_and_typical_sentences():
    values = np.array([0.1, 0.2, 0.2, 0.9]).reshape(4, 1, 1)  # [N, L=1, H=1]
    stats = _stats(values, np.array([1, 1, 2, 0]))  # the last sentence has no rows
    assert stats.means("encoder")["max_weight"][0, 0] == pytest.approx((0.1 + 0.2 + 0.4) / 4)
    typical, unusual = stats.typical("encoder", 0, 0, k=1)
    assert typical != unusual and unusual == [0] and 3 not in typical
    table = stats.table()
    assert len(table) == 1 and table[0]["diag_distance"] is None
    diff = compare_stats(stats, _stats(values + 0.5, np.array([1, 1, 2, 0])))
    assert diff[0]["max_weight"] == pytest.approx(0.5)


@pytest.mark.parametrize("kind", ["transformer", "rnn-attention"])
def test_tiny_model_statistics(kind):
    translator = make_toy_translator(seed=0, kind=kind)
    sources = ["q1 q2 q3", "q4 q5", "q6 q7 q8 q9 q10", "q11"]
    stats = compute_head_stats(translator, sources, ["w3 w2 w1", "w5 w4", "w10 w9 w8 w7 w6", "w11"], batch_size=3)
    layout = translator.kind.layout(translator.config)
    assert stats.kinds == translator.kind.attention_kinds
    for kind_name in stats.kinds:
        assert stats.layout(kind_name) == layout[kind_name]
        means = stats.means(kind_name)
        assert np.all(means["entropy"] >= -1e-6) and np.all(means["max_weight"] <= 1 + 1e-6)
        assert np.allclose(means["sink"], means["sos"] + means["eos"] + means["punct"])
    assert stats.rows["cross"].tolist() == [4, 3, 6, 2]  # <sos> + target words
    if "encoder" in stats.kinds:
        assert stats.rows["encoder"].tolist() == [5, 4, 7, 3]
    assert len(stats.table()) == sum(a * b for a, b in layout.values())


def test_greedy_targets_progress_and_stop():
    translator = make_toy_translator(seed=0)
    events = list(head_stats_steps(translator, ["q1 q2", "q3", "q4 q5 q6"], batch_size=2))
    phases = [e.phase for e in events if isinstance(e, AnalysisProgress)]
    assert "decoding" in phases and phases[-1] == "attention"
    assert isinstance(events[-1], HeadStatsReady) and events[-1].stats.targets == "greedy"
    stop = threading.Event()
    stop.set()
    assert not any(isinstance(e, HeadStatsReady) for e in head_stats_steps(translator, ["q1"] * 5, stop=stop))


def test_language_model_statistics():
    lm = make_toy_lm()
    stats = compute_head_stats(lm, ["abc", "defg"])
    assert stats.kinds == ("decoder",) and stats.rows["decoder"].tolist() == [4, 5]


def test_language_tags_count_with_sos_as_sinks():
    """NLLB's "deu_Latn", M2M100's "__de__" and mBART's "de_DE" start a sentence as <sos> does: a head resting on one
    is a sink head, not one reading a word."""
    from attnviz.engine.analysis.names import is_language_tag
    from attnviz.engine.analysis.stats import start_table
    from attnviz.engine.text.vocab import Vocab

    vocab = Vocab(["<unk>", "<pad>", "<sos>", "<eos>", "deu_Latn", "__de__", "de_DE", "en_XX", "▁Hund", "Latn",
                   "de", "ab_cd"])
    assert start_table(vocab).tolist() == [False, False, True, False, True, True, True, True, False, False, False,
                                           False]
    assert not is_language_tag("</s>") and not is_language_tag("DE_de")
    ids = torch.tensor([[4, 8, 3]])  # deu_Latn ▁Hund <eos>
    attn = torch.tensor([0.6, 0.3, 0.1]).expand(1, 1, 1, 3, 3).clone()  # every row: 0.6 on the tag
    punct = torch.zeros(len(vocab), dtype=torch.bool)
    with_tags, _ = row_statistics(attn, ids != PAD_ID, ids, punct, "encoder", start_table(vocab))
    without, _ = row_statistics(attn, ids != PAD_ID, ids, punct, "encoder")
    assert with_tags["sos"][0, 0, 0] / 3 == pytest.approx(0.6) and without["sos"][0, 0, 0] == 0
    assert with_tags["sink"][0, 0, 0] / 3 == pytest.approx(0.7)  # tag + <eos>: past the sink threshold 0.5


@pytest.mark.data
def test_a_model_naming_no_corpus_reads_multi30k_of_its_pair_or_says_what_to_give(data_dir):
    """An imported folder or an LLM names no training corpus: the Analysis tab's default (the validation split)
    reads Multi30k's of its language pair; a pair Multi30k lacks is told what to choose, in the tab and the CLI."""
    from attnviz.engine.analysis.run import corpus_pairs
    from attnviz.engine.corpus.reader import load_split
    from attnviz.engine.errors import ConfigError
    from attnviz.engine.training.presets import get_preset

    translator = make_toy_translator(seed=0)  # de -> en, saved with no recipe
    assert translator.card.recipe is None
    sources, targets = corpus_pairs(translator, "val", limit=3, data_dir=data_dir)
    val = load_split(get_preset("multi30k-de-en").corpus, data_dir, "val")[:3]
    assert (sources, targets) == ([s for s, _ in val], [t for _, t in val])
    with pytest.raises(ConfigError, match=r"Multi30k has no es-en pair; .*Corpus, Text files\.\.\..*--src and --ref"):
        corpus_pairs(make_toy_translator(seed=0, langs=("es", "en")), "val", data_dir=data_dir)
