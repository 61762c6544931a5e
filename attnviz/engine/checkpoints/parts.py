"""A checkpoint file's metadata read into the parts a translator is made of, with every check that loading makes:
the model settings, both vocabularies (specials first, no repeats) and their sizes against the settings, the
language tags (each an entry of the target vocabulary), both tokenizers' settings and, for a SentencePiece one, its
model among the file's tensors. One function for ``translate`` (``engine.translator.load_checkpoint``) and ``info``
(``engine.loading.inspect_model``), so that ``info`` never passes a file that ``translate`` refuses. Torch-free: the
tensor index names the tokenizer models, and their bytes are given only by a loader that has read them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from attnviz.engine.checkpoints.header import TOKENIZER_PREFIX
from attnviz.engine.config import ModelConfig
from attnviz.engine.errors import CheckpointError, ConfigError
from attnviz.engine.kinds import check
from attnviz.engine.text.languages import Languages
from attnviz.engine.text.tokenize import TokenizerSpec
from attnviz.engine.text.vocab import Vocab

SIDES = ("src", "tgt")


@dataclass(frozen=True)
class CheckpointParts:
    """What a checkpoint's metadata holds, checked."""

    config: ModelConfig
    src_vocab: Vocab
    tgt_vocab: Vocab
    src_spec: TokenizerSpec
    tgt_spec: TokenizerSpec
    languages: Languages | None


def checked_languages(data: Any, vocab: Vocab) -> Languages:
    """A model's stored language tags (``Languages.from_dict``), each an entry of its vocabulary (ConfigError)."""
    languages = Languages.from_dict(data)
    missing = [tag for tag in languages.tags if tag not in vocab]
    if missing:
        raise ConfigError(f"language tag {missing[0][:40]!r} is not in the model's vocabulary")
    return languages


def _from_meta(path: str, meta: Mapping[str, Any], key: str, parse):
    if key not in meta:
        what = "vocabulary" if key.endswith("vocab") else "setting"
        raise CheckpointError(f"{path}: the checkpoint has no {key} ({what}); it cannot translate without it. "
                              "Re-save it with attnviz, or train a new model.")
    try:
        return parse(meta[key])
    except (ConfigError, TypeError, ValueError) as exc:
        raise CheckpointError(f"{path}: its {key} is invalid: {exc}") from None


def checkpoint_parts(path: str | os.PathLike[str], meta: Mapping[str, Any],
                     index: Mapping[str, Any]) -> CheckpointParts:
    """``meta``'s parts, checked as loading needs them (``CheckpointError`` naming the entry). ``index`` is the
    file's tensor index, where a SentencePiece tokenizer's model must be (the specs come without its bytes, which
    the loader adds once it has read them)."""
    path = str(path)
    cfg = _from_meta(path, meta, "model", lambda d: check(ModelConfig.from_dict(d)))
    src_vocab = _from_meta(path, meta, "src_vocab", Vocab.from_list)
    tgt_vocab = _from_meta(path, meta, "tgt_vocab", Vocab.from_list)
    if (len(src_vocab), len(tgt_vocab)) != (cfg.src_vocab_size, cfg.tgt_vocab_size):
        raise CheckpointError(f"{path}: vocabulary sizes {len(src_vocab)}/{len(tgt_vocab)} do not match the model "
                              f"config {cfg.src_vocab_size}/{cfg.tgt_vocab_size}; the file is inconsistent.")
    languages = None
    if "languages" in meta:  # a multilingual model's tags, checked here so that a bad entry names the file
        languages = _from_meta(path, meta, "languages", lambda d: checked_languages(d, tgt_vocab))
    specs = []
    for side in SIDES:
        stored = f"{TOKENIZER_PREFIX}{side}" in index
        spec = _from_meta(path, meta, f"{side}_tokenizer", TokenizerSpec.from_dict)
        if spec.mode == "sentencepiece" and not stored:
            raise CheckpointError(f"{path}: its {side}_tokenizer is a SentencePiece one, but the file holds no "
                                  f"{TOKENIZER_PREFIX}{side} model to split text with; the file is incomplete. "
                                  "Re-save it with attnviz.")
        specs.append(spec)
    return CheckpointParts(cfg, src_vocab, tgt_vocab, specs[0], specs[1], languages)
