"""Translator: a model with its vocabularies and tokenizers, the object outside code works with.

A language model (``has_source`` False) is a Translator without a source: the text given to ``steps`` is the
prefix it continues, and ``generate`` samples whole sequences.

``load_translator(path)`` reads a checkpoint; ``Translator.steps`` streams one sentence's decoding as events;
``translate`` returns a whole ``Translation``; ``translate_batch`` decodes many sentences in padded, length-sorted
batches (greedy or beam). ``save`` writes the translator back as a self-describing checkpoint.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from attnviz.config import DecodeConfig, ModelConfig
from attnviz.engine.checkpoint import load_tensors, save_tensors
from attnviz.engine.decoding import beam_batch, decode_steps, greedy_batch, pad_batch
from attnviz.engine.errors import CheckpointError, ConfigError, InputError
from attnviz.engine.events import DecodeStep, EncoderPass, Translation, assemble
from attnviz.engine.header_schema import check_against_index, check_finite
from attnviz.engine.model import Transformer, count_parameters
from attnviz.engine.rnn import RNNAttention
from attnviz.engine.tokenize import LANGUAGE_NAMES, TokenizerSpec, detokenize, languages_label
from attnviz.engine.vocab import EOS, SOS, Vocab


def build_model(cfg: ModelConfig) -> torch.nn.Module:
    """The model class for a config's ``kind``."""
    if cfg.kind in ("transformer", "char-lm"):
        return Transformer(cfg)
    if cfg.kind == "rnn-attention":
        return RNNAttention(cfg)
    raise ConfigError(f"unknown model kind {cfg.kind!r}")


def _fit(tokens: list[str], vocab: Vocab, limit: int, too_long: str) -> tuple[list[str], list[str]]:
    """Cut ``tokens`` to ``limit``, warning with ``too_long`` (a template of n, limit and dropped), and warn about
    tokens the vocabulary lacks."""
    warnings = []
    if len(tokens) > limit:
        warnings.append(too_long.format(n=len(tokens), limit=limit, dropped=len(tokens) - limit))
        tokens = tokens[:limit]
    unknown = sorted({t for t in tokens if t not in vocab})
    if unknown:
        shown = ", ".join(unknown[:8]) + (" ..." if len(unknown) > 8 else "")
        warnings.append(f"Not in the model's vocabulary (read as <unk>): {shown}")
    return tokens, warnings


def _tied_keys(cfg: ModelConfig) -> set[str]:
    return {"out_proj.weight"} if cfg.tie_output else set()


class Translator:
    """A model ready to translate: tokenizer -> vocab ids -> model -> search -> tokens -> text."""

    def __init__(self, model: torch.nn.Module, src_vocab: Vocab, tgt_vocab: Vocab, src_spec: TokenizerSpec,
                 tgt_spec: TokenizerSpec, metadata: dict[str, Any] | None = None):
        self.model = model.eval()
        self.src_vocab, self.tgt_vocab = src_vocab, tgt_vocab
        self.src_spec, self.tgt_spec = src_spec, tgt_spec
        self.metadata = dict(metadata or {})

    @property
    def config(self) -> ModelConfig:
        return self.model.cfg

    @property
    def has_source(self) -> bool:
        """False for a language model: it continues a prefix instead of translating a sentence."""
        return self.config.has_source

    @property
    def info(self) -> dict[str, Any]:
        meta = self.metadata
        return {
            "src_lang": self.src_spec.lang,
            "tgt_lang": self.tgt_spec.lang,
            "languages": languages_label(self.src_spec.lang, self.tgt_spec.lang, self.has_source,
                                         self.tgt_spec.mode),
            "name": meta.get("name", ""),
            "kind": self.config.kind,
            "attention_kinds": list(self.config.attention_kinds),
            "model": self.config.to_dict(),
            "parameters": count_parameters(self.model),
            "src_vocab_size": len(self.src_vocab),
            "tgt_vocab_size": len(self.tgt_vocab),
            "src_tokenizer": self.src_spec.to_dict(),
            "tgt_tokenizer": self.tgt_spec.to_dict(),
            "metrics": meta.get("metrics", {}),
            "preset": meta.get("preset"),
            "train_config": meta.get("train_config"),
            "history": meta.get("history", []),
            "created": meta.get("created", {}),
            "dtype": meta.get("dtype", "float32"),
            "path": meta.get("path"),
        }

    # -- source preparation ---------------------------------------------------------------------------------------

    def prepare_source(self, text: str) -> tuple[list[str], list[int], list[str]]:
        """Tokenize ``text`` into (labels, ids, warnings); labels and ids include ``<sos>``/``<eos>``."""
        if not isinstance(text, str) or not text.strip():
            raise InputError("Nothing to translate: the sentence is empty. Type a sentence in "
                             f"{LANGUAGE_NAMES.get(self.src_spec.lang, self.src_spec.lang)}.")
        tokens = self.src_spec.tokenize(text)
        if not tokens:
            raise InputError("Nothing to translate: the text has no words after removing control characters.")
        tokens, warnings = _fit(tokens, self.src_vocab, self.model.max_source_len - 2,
                                "The sentence has {n} tokens but the model reads at most {limit}; the last {dropped} "
                                "were dropped.")
        return [SOS, *tokens, EOS], self.src_vocab.encode(tokens, add_sos_eos=True), warnings

    def prepare_prefix(self, text: str) -> tuple[list[int], list[str]]:
        """A language model's prefix (possibly empty) as target ids, and warnings."""
        tokens = self.tgt_spec.tokenize(text or "")
        tokens, warnings = _fit(tokens, self.tgt_vocab, self.model.max_target_len - 1,
                                "The prefix has {n} tokens but the model's context holds {limit}; only the first "
                                "{limit} were kept.")
        return self.tgt_vocab.encode(tokens), warnings

    def detokenize(self, tokens: Sequence[str]) -> str:
        return detokenize([t for t in tokens if t != EOS], self.tgt_spec.mode)

    # -- decoding ---------------------------------------------------------------------------------------------------

    def steps(self, text: str, max_len: int = 50, topk: int = 10, recompute: bool = False,
              temperature: float = 0.0, seed: int = 0, generator: torch.Generator | None = None
              ) -> Iterator[EncoderPass | DecodeStep]:
        """Decoding of one sentence (or a language model's prefix) as events: an ``EncoderPass``, then a
        ``DecodeStep`` per token; greedy, or sampled at ``temperature`` (from ``generator`` or one seeded with
        ``seed``)."""
        if self.has_source:
            labels, ids, warnings = self.prepare_source(text)
            forced: list[int] = []
        else:
            labels, ids = [], []
            forced, warnings = self.prepare_prefix(text)
        if temperature > 0 and generator is None:
            generator = torch.Generator().manual_seed(seed)
        yield from decode_steps(self.model, ids, labels, self.tgt_vocab, max_len, topk, warnings, recompute, forced,
                                temperature, generator)

    def translate(self, text: str, max_len: int = 50, topk: int = 10, temperature: float = 0.0, seed: int = 0,
                  generator: torch.Generator | None = None) -> Translation:
        events = list(self.steps(text, max_len, topk, temperature=temperature, seed=seed, generator=generator))
        steps = [e for e in events if isinstance(e, DecodeStep)]
        return assemble(events[0], steps, self.detokenize([s.token for s in steps]))

    def generate(self, prefix: str = "", n: int = 1, temperature: float = 1.0, seed: int = 0,
                 max_len: int = 50) -> list[Translation]:
        """``n`` continuations of ``prefix`` drawn one after another from one generator seeded with ``seed``
        (greedy when ``temperature`` is 0, so all ``n`` are then the same)."""
        generator = torch.Generator().manual_seed(seed)
        return [self.translate(prefix, max_len, temperature=temperature, generator=generator) for _ in range(n)]

    def translate_batch_tokens(self, texts: Sequence[str], decode: DecodeConfig | None = None,
                               batch_size: int = 128) -> list[list[str]]:
        """Output tokens (no specials) of many sentences; empty inputs give empty outputs."""
        decode = decode or DecodeConfig()
        prepared: list[list[int] | None] = []
        for text in texts:
            try:
                prepared.append(self.prepare_source(text)[1])
            except InputError:
                prepared.append(None)
        order = sorted((i for i, p in enumerate(prepared) if p is not None), key=lambda i: len(prepared[i]))
        results: list[list[str]] = [[] for _ in texts]
        with torch.inference_mode():
            for start in range(0, len(order), batch_size):
                chunk = order[start:start + batch_size]
                src = pad_batch([prepared[i] for i in chunk])
                if decode.beam > 1:
                    ids = beam_batch(self.model, src, decode.beam, decode.max_len, decode.length_penalty)
                else:
                    ids = greedy_batch(self.model, src, decode.max_len)
                for i, out in zip(chunk, ids):
                    results[i] = self.tgt_vocab.decode(out)
        return results

    def translate_batch(self, texts: Sequence[str], decode: DecodeConfig | None = None,
                        batch_size: int = 128) -> list[str]:
        return [self.detokenize(toks) for toks in self.translate_batch_tokens(texts, decode, batch_size)]

    # -- persistence ------------------------------------------------------------------------------------------------

    def save(self, path: str | os.PathLike, half: bool = False, **extra: Any) -> None:
        """Write a checkpoint; ``extra`` entries (metrics, history, name...) join the metadata."""
        save_tensors(path, *self.checkpoint_parts(**extra), half=half)

    def checkpoint_parts(self, **extra: Any) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        """The tensors and metadata ``save`` writes (a run's state file embeds them too)."""
        state = {k: v for k, v in self.model.state_dict().items() if k not in _tied_keys(self.config)}
        meta = {k: v for k, v in self.metadata.items() if k not in ("format", "format_version", "dtype", "path")}
        meta.update(extra)
        meta.update(model=self.config.to_dict(), src_vocab=self.src_vocab.to_list(), tgt_vocab=self.tgt_vocab.to_list(),
                    src_tokenizer=self.src_spec.to_dict(), tgt_tokenizer=self.tgt_spec.to_dict())
        return state, meta


def _from_meta(path: str, meta: dict[str, Any], key: str, parse):
    if key not in meta:
        what = "vocabulary" if key.endswith("vocab") else "setting"
        raise CheckpointError(f"{path}: the checkpoint has no {key} ({what}); it cannot translate without it. "
                              "Re-save it with attnviz, or train a new model.")
    try:
        return parse(meta[key])
    except (ConfigError, TypeError, ValueError) as exc:
        raise CheckpointError(f"{path}: its {key} is invalid: {exc}") from None


def load_translator(path: str | os.PathLike) -> Translator:
    """Load a checkpoint file into a ready ``Translator``; raises ``CheckpointError`` with a clear message."""
    path = str(path)
    meta, tensors = load_tensors(path)
    cfg = _from_meta(path, meta, "model", ModelConfig.from_dict)
    src_vocab = _from_meta(path, meta, "src_vocab", Vocab.from_list)
    tgt_vocab = _from_meta(path, meta, "tgt_vocab", Vocab.from_list)
    src_spec = _from_meta(path, meta, "src_tokenizer", TokenizerSpec.from_dict)
    tgt_spec = _from_meta(path, meta, "tgt_tokenizer", TokenizerSpec.from_dict)
    if (len(src_vocab), len(tgt_vocab)) != (cfg.src_vocab_size, cfg.tgt_vocab_size):
        raise CheckpointError(f"{path}: vocabulary sizes {len(src_vocab)}/{len(tgt_vocab)} do not match the model "
                              f"config {cfg.src_vocab_size}/{cfg.tgt_vocab_size}; the file is inconsistent.")
    # shapes are compared on a meta-device model first, so a size bomb is refused before anything is allocated
    check_against_index(path, build_model, cfg, {k: {"shape": list(t.shape)} for k, t in tensors.items()},
                        _tied_keys(cfg))
    check_finite(path, tensors)
    model = build_model(cfg)
    model.load_state_dict(tensors, strict=not _tied_keys(cfg))
    meta["path"] = path
    return Translator(model, src_vocab, tgt_vocab, src_spec, tgt_spec, meta)
