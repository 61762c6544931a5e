"""Tiny models for tests: a toy German-like -> English-like word mapping that a 2-layer model learns in seconds,
in each translation kind (Transformer, LSTM with attention), and a toy character language model."""

from __future__ import annotations

import random

import torch

from attnviz.engine.config import ModelConfig
from attnviz.engine.corpus.batching import pad_batch
from attnviz.engine.kinds import check, get_kind
from attnviz.engine.text.tokenize import TokenizerSpec
from attnviz.engine.text.vocab import PAD_ID, Vocab
from attnviz.engine.translator import Translator, build_model

SRC_WORDS = [f"q{i}" for i in range(12)]
TGT_WORDS = [f"w{i}" for i in range(12)]


def toy_pair(rng: random.Random) -> tuple[list[str], list[str]]:
    """Source words map one to one onto target words, in reversed order: attention must cross over."""
    idx = [rng.randrange(len(SRC_WORDS)) for _ in range(rng.randint(2, 6))]
    return [SRC_WORDS[i] for i in idx], [TGT_WORDS[i] for i in reversed(idx)]


def capture_atol(kind: str) -> float:
    """How closely two captures of the same maps agree at the precision ``kind`` keeps them (float16: a rounding
    step apart at most)."""
    return 2e-3 if get_kind(kind).capture_dtype == "float16" else 1e-5


def example_config(kind: str, src_vocab_size: int, tgt_vocab_size: int, **overrides) -> ModelConfig:
    """A small model of ``kind`` as its registry entry describes one, with ``overrides`` (checked by the kind)."""
    settings = dict(get_kind(kind).example_settings) | overrides
    return check(ModelConfig(src_vocab_size, tgt_vocab_size, kind=kind, **settings))


def make_toy_translator(seed: int = 0, kind: str = "transformer", *, langs: tuple[str, str] = ("de", "en"),
                        **overrides) -> Translator:
    """A toy-task translation model of ``kind`` (the registry's small example settings, with ``overrides``),
    labelled as translating ``langs`` (source, target)."""
    torch.manual_seed(seed)
    src_vocab, tgt_vocab = Vocab.build([SRC_WORDS]), Vocab.build([TGT_WORDS])
    cfg = example_config(kind, len(src_vocab), len(tgt_vocab), **overrides)
    src, tgt = (TokenizerSpec(lang, mode="whitespace") for lang in langs)
    return Translator(build_model(cfg), src_vocab, tgt_vocab, src, tgt)


LETTERS = "abcdefghij"


def toy_word(rng: random.Random) -> str:
    """A run of consecutive letters ("cdef"): after its first letter every character is predictable."""
    start = rng.randrange(len(LETTERS) - 1)
    return LETTERS[start:start + rng.randint(2, 5)]


def make_toy_lm(seed: int = 0, **overrides) -> Translator:
    """A tiny character language model (kind ``char-lm``) over ``LETTERS``."""
    torch.manual_seed(seed)
    vocab = Vocab.build([list(LETTERS)])
    cfg = example_config("char-lm", len(vocab), len(vocab), **overrides)
    spec = TokenizerSpec("en", mode="chars")
    return Translator(build_model(cfg), vocab, vocab, spec, spec)


def toy_lm_batch(translator: Translator, rng: random.Random, size: int = 32):
    tgt = pad_batch([translator.tgt_vocab.encode(toy_word(rng), add_sos_eos=True) for _ in range(size)])
    return tgt[:, :0], tgt  # a language model reads no source: [B, 0]


def train_toy_lm(translator: Translator, steps: int = 300, seed: int = 0) -> list[float]:
    return _fit(translator, toy_lm_batch, steps, seed)


def toy_batch(translator: Translator, rng: random.Random, size: int = 32):
    pairs = [toy_pair(rng) for _ in range(size)]
    src = pad_batch([translator.src_vocab.encode(s, add_sos_eos=True) for s, _ in pairs])
    tgt = pad_batch([translator.tgt_vocab.encode(t, add_sos_eos=True) for _, t in pairs])
    return src, tgt


def train_toy(translator: Translator, steps: int = 300, seed: int = 0, lr: float = 3e-3) -> list[float]:
    return _fit(translator, toy_batch, steps, seed, lr)


def _fit(translator: Translator, make_batch, steps: int, seed: int, lr: float = 3e-3) -> list[float]:
    """Teacher-forced cross-entropy training on ``make_batch(translator, rng)``; returns every step's loss."""
    rng = random.Random(seed)
    model = translator.model.train()
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        src, tgt = make_batch(translator, rng)
        logits = model(src, tgt[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), tgt[:, 1:].flatten(), ignore_index=PAD_ID)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.eval()
    return losses
