"""Tiny models for tests: a toy German-like -> English-like word mapping that a 2-layer model learns in seconds."""

from __future__ import annotations

import random

import torch

from attnviz.config import ModelConfig
from attnviz.engine.decoding import pad_batch
from attnviz.engine.model import Transformer
from attnviz.engine.tokenize import TokenizerSpec
from attnviz.engine.translator import Translator
from attnviz.engine.vocab import PAD_ID, Vocab

SRC_WORDS = [f"q{i}" for i in range(12)]
TGT_WORDS = [f"w{i}" for i in range(12)]


def toy_pair(rng: random.Random) -> tuple[list[str], list[str]]:
    """Source words map one to one onto target words, in reversed order: attention must cross over."""
    idx = [rng.randrange(len(SRC_WORDS)) for _ in range(rng.randint(2, 6))]
    return [SRC_WORDS[i] for i in idx], [TGT_WORDS[i] for i in reversed(idx)]


def make_toy_translator(seed: int = 0, **overrides) -> Translator:
    torch.manual_seed(seed)
    src_vocab, tgt_vocab = Vocab.build([SRC_WORDS]), Vocab.build([TGT_WORDS])
    settings = dict(d_model=32, enc_layers=2, dec_layers=2, heads=4, ff_dim=64, dropout=0.1, max_positions=24)
    settings.update(overrides)
    cfg = ModelConfig(len(src_vocab), len(tgt_vocab), **settings)
    spec = TokenizerSpec("de", mode="whitespace")
    return Translator(Transformer(cfg), src_vocab, tgt_vocab, spec, TokenizerSpec("en", mode="whitespace"))


def toy_batch(translator: Translator, rng: random.Random, size: int = 32):
    pairs = [toy_pair(rng) for _ in range(size)]
    src = pad_batch([translator.src_vocab.encode(s, add_sos_eos=True) for s, _ in pairs])
    tgt = pad_batch([translator.tgt_vocab.encode(t, add_sos_eos=True) for _, t in pairs])
    return src, tgt


def train_toy(translator: Translator, steps: int = 300, seed: int = 0) -> list[float]:
    """Teacher-forced cross-entropy training; returns the loss of every step."""
    rng = random.Random(seed)
    model = translator.model.train()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(steps):
        src, tgt = toy_batch(translator, rng)
        logits = model(src, tgt[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), tgt[:, 1:].flatten(), ignore_index=PAD_ID)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.eval()
    return losses
