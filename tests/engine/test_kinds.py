"""Every registered model kind keeps the same promises, checked over the registry itself; and a new kind is one
module: a throwaway kind defined in this file alone decodes through ``Translator.steps`` and ``attnviz translate``."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest
import torch
from torch import Tensor, nn

from attnviz.cli.main import main
from attnviz.engine.config import DecodeConfig, ModelConfig
from attnviz.engine.corpus.batching import pad_batch
from attnviz.engine.errors import ConfigError
from attnviz.engine.events import DecodeStep, EncoderPass
from attnviz.engine.kinds import ModelKind, all_kinds, check, get_kind, kind_of, registered
from attnviz.engine.loading import load_translator, read_card
from attnviz.engine.models.protocol import Decoded, Encoded, IncrementalModel, SearchModel
from attnviz.engine.text.tokenize import TokenizerSpec
from attnviz.engine.text.vocab import PAD_ID, Vocab
from attnviz.engine.translator import Translator, build_model
from tests.helpers import SRC_WORDS, capture_atol, example_config

KINDS = [k.name for k in all_kinds()]
TEXT = "q1 q2 q3 q4"


def example_translator(kind: str, seed: int = 0) -> Translator:
    """A random model of ``kind`` over the toy words; a language model reads and writes the same words."""
    torch.manual_seed(seed)
    vocab = Vocab.build([SRC_WORDS])
    spec = TokenizerSpec("de", mode="whitespace")
    model = build_model(example_config(kind, len(vocab), len(vocab)))
    return Translator(model, vocab, vocab, spec, TokenizerSpec("en", mode="whitespace"))


def test_the_built_in_kinds_are_registered():
    assert {"transformer", "rnn-attention", "char-lm"} <= set(KINDS)
    with pytest.raises(ConfigError, match="unknown model kind 'gru'"):
        get_kind("gru")
    with pytest.raises(ConfigError, match="kind must be one of"):
        check(ModelConfig(10, 10, kind="gru"))


@pytest.mark.parametrize("kind", KINDS)
def test_a_kind_builds_a_search_model_with_a_forward_pass(kind):
    translator = example_translator(kind)
    model = translator.model.train()
    assert isinstance(model, SearchModel) and kind_of(model.cfg) is get_kind(kind)
    src = pad_batch([[2, 5, 6, 3], [2, 7, 3]]) if kind_of(model.cfg).has_source else pad_batch([[]] * 2)
    tgt = pad_batch([[2, 8, 9], [2, 10, 11]])
    logits = model(src, tgt)
    assert logits.shape == (2, 3, model.cfg.tgt_vocab_size) and torch.isfinite(logits).all()


@pytest.mark.parametrize("kind", KINDS)
def test_cached_steps_equal_recomputation(kind):
    translator = example_translator(kind, seed=1)
    decode = DecodeConfig(max_len=6)
    cached = [e for e in translator.steps(TEXT, decode) if isinstance(e, DecodeStep)]
    recomputed = [e for e in translator.steps(TEXT, decode, recompute=True) if isinstance(e, DecodeStep)]
    assert [s.token for s in cached] == [s.token for s in recomputed] and cached
    for a, b in zip(cached, recomputed, strict=True):
        assert a.probability == pytest.approx(b.probability, abs=1e-5)
        for rows_a, rows_b in ((a.self_attention, b.self_attention), (a.cross_attention, b.cross_attention)):
            assert (rows_a is None) == (rows_b is None)
            if rows_a is not None:
                np.testing.assert_allclose(rows_a, rows_b, atol=capture_atol(kind))


@pytest.mark.parametrize("kind", KINDS)
def test_decoding_yields_exactly_the_kinds_attention_as_distributions(kind):
    translator = example_translator(kind, seed=2)
    entry = get_kind(kind)
    events = list(translator.steps(TEXT, DecodeConfig(max_len=5)))
    assert isinstance(events[0], EncoderPass) and all(isinstance(e, DecodeStep) for e in events[1:])
    t = translator.translate(TEXT, DecodeConfig(max_len=5))
    assert tuple(sorted(t.attention)) == tuple(sorted(entry.attention_kinds))
    expected = entry.expected_shapes(translator.config, len(t.src_tokens), len(t.tokens))
    for name, maps in t.attention.items():
        assert maps.shape == expected[name]
        if entry.reads_prompt and name in ("cross", "decoder"):  # the two parts of one softmax
            other = t.attention[{"cross": "decoder"}.get(name, "cross")]
            np.testing.assert_allclose(maps.sum(-1, dtype=np.float64) + other.sum(-1, dtype=np.float64), 1.0,
                                       atol=capture_atol(kind) * 4)
        else:
            # every query row is a distribution
            np.testing.assert_allclose(maps.sum(-1, dtype=np.float64), 1.0, atol=capture_atol(kind) * 4)
        if name == "decoder":  # and a decoder row never looks ahead
            assert np.all(np.triu(maps, k=1) == 0)


@pytest.mark.parametrize("kind", KINDS)
def test_a_kinds_checkpoint_round_trips_and_describes_itself(kind, tmp_path):
    translator = example_translator(kind, seed=3)
    path = tmp_path / f"{kind}.safetensors"
    translator.save(path, name="toy")
    loaded = load_translator(path)
    assert loaded.translate(TEXT, DecodeConfig(max_len=6)).tokens == translator.translate(
        TEXT, DecodeConfig(max_len=6)).tokens
    card = read_card(path)
    assert card.kind is get_kind(kind) and card.name == "toy"
    assert card.parameters == sum(p.numel() for p in {id(p): p for p in translator.model.parameters()}.values())
    assert card.to_info() | {"runs_as": "float32"} == loaded.info | {"path": str(path)}  # a loaded model runs


# -- a throwaway kind, defined here and nowhere else ------------------------------------------------------------


@dataclass
class _Cache:
    memory: Tensor  # [B, S, D]
    mask: Tensor  # [B, 1, 1, S]
    length: int = 0

    def select(self, index: Tensor) -> _Cache:
        return _Cache(self.memory.index_select(0, index), self.mask.index_select(0, index), self.length)


class BagAttention(IncrementalModel):
    """Each target token attends once over the source embeddings (one layer, one head) and predicts the next."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.src_embed = nn.Embedding(cfg.src_vocab_size, cfg.d_model)
        self.tgt_embed = nn.Embedding(cfg.tgt_vocab_size, cfg.d_model)
        self.out_proj = nn.Linear(2 * cfg.d_model, cfg.tgt_vocab_size)

    def encode(self, src: Tensor, need_weights: bool = False) -> Encoded:
        return Encoded(self.src_embed(src), (src != PAD_ID)[:, None, None, :])

    def start(self, enc: Encoded) -> _Cache:
        return _Cache(enc.memory, enc.mask)

    def decode(self, tgt: Tensor, enc: Encoded | None, need_weights: bool = False, cache=None) -> Decoded:
        keep = cache is not None
        cache = cache or self.start(enc)
        q = self.tgt_embed(tgt)  # [B, T, D]
        scores = q @ cache.memory.transpose(1, 2) / math.sqrt(self.cfg.d_model)  # [B, T, S]
        weights = scores.masked_fill(~cache.mask[:, 0], float("-inf")).softmax(-1)
        if keep:
            cache.length += tgt.size(1)
        hidden = torch.cat([q, weights @ cache.memory], dim=-1)  # [B, T, 2D]
        return Decoded(hidden, [], [weights[:, None]] if need_weights else [])  # [B, T, S] -> [B, 1, T, S]

    def project(self, hidden: Tensor) -> Tensor:
        return self.out_proj(hidden)

    def forward(self, src: Tensor, tgt_in: Tensor, teacher_forcing: float = 1.0) -> Tensor:
        return self.project(self.decode(tgt_in, self.encode(src)).hidden)


BAG = ModelKind(name="bag-attention", title="bag-of-embeddings attention (a test kind)", attention_kinds=("cross",),
                has_source=True, build=BagAttention, layout=lambda cfg: {"cross": (1, 1)},
                describe=lambda cfg: f"embedding {cfg.d_model}, one attention", example_settings=dict(d_model=16))


def test_a_kind_defined_in_one_file_decodes_through_the_translator_and_the_cli(tmp_path, capsys):
    with registered(BAG):
        assert "bag-attention" in [k.name for k in all_kinds()]
        translator = example_translator("bag-attention", seed=4)
        t = translator.translate(TEXT, DecodeConfig(max_len=4))
        assert set(t.attention) == {"cross"} and t.attention["cross"].shape == (1, 1, len(t.tokens), 6)
        np.testing.assert_allclose(t.attention["cross"].sum(-1), 1.0, atol=1e-6)
        path = tmp_path / "bag.safetensors"
        translator.save(path)
        assert main(["translate", "-m", str(path), "--max-len", "4", TEXT]) == 0
        assert capsys.readouterr().out.strip() == t.text
        assert main(["info", str(path)]) == 0
        assert "bag-attention: embedding 16, one attention" in capsys.readouterr().out
    with pytest.raises(ConfigError, match="unknown model kind 'bag-attention'"):
        get_kind("bag-attention")


def test_shared_and_tied_embeddings_are_one_table_stored_once():
    from attnviz.engine.models.protocol import stored_state, tied_keys

    model = example_translator("marian").model
    assert model.cfg.share_embeddings and model.cfg.tie_output
    assert model.out_proj.weight is model.tgt_embed.tokens.weight is model.src_embed.tokens.weight
    assert tied_keys(model) == {"tgt_embed.tokens.weight", "out_proj.weight"}
    assert "src_embed.tokens.weight" in stored_state(model)
