"""The decoding an imported model's authors configured: a Hugging Face folder's ``generation_config.json`` (or, in
an older folder without one, the same fields in ``config.json``), read and checked through the shared folder checks
(``engine.checkpoints.folder``) and turned into ``DecodeConfig`` fields in attnviz's token ids, without torch.

Every folder format reads it the same way (``read_generation``), its token ids mapped through the format's target
order (the folder's id behind each attnviz id). The fields follow transformers' ``GenerationConfig`` and mean what
``generate`` makes of them: ``num_beams``, ``length_penalty`` (score / length ** penalty), ``max_length`` (the
decoder's start token included, so one output token fewer) or ``max_new_tokens``, ``no_repeat_ngram_size``,
``bad_words_ids``, ``forced_bos_token_id``/``forced_eos_token_id`` and ``early_stopping`` (true, false or "never").
Settings attnviz does not apply (sampling, repetition penalty, a minimum length...) are named in the notes.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from attnviz.engine.checkpoints.folder import AGAIN, check_ids, check_number, read_object
from attnviz.engine.errors import CheckpointError
from attnviz.engine.text.vocab import EOS_ID

FILE = "generation_config.json"
MAX_BEAMS = 64  # as the command line's --beam: wider beams give no better translations
MAX_LENGTH = 100_000  # far above any model's positions (Marian 512, NLLB 1024); a larger value is damaged
MAX_NGRAM = 100
MAX_BAD_WORDS = 100_000  # sequences; a real list bans one or a few tokens
MAX_WORD = 64  # tokens in one banned sequence
HF_MAX_LENGTH = 20  # transformers' default max_length, when a file names none
FIELDS = ("num_beams", "length_penalty", "max_length", "max_new_tokens", "no_repeat_ngram_size", "bad_words_ids",
          "forced_bos_token_id", "forced_eos_token_id", "early_stopping")
IDS = ("bos_token_id", "pad_token_id", "eos_token_id", "decoder_start_token_id", "forced_bos_token_id",
       "forced_eos_token_id")
# settings that change what generate gives but that attnviz does not apply -> the value that changes nothing
NOT_APPLIED = {"do_sample": False, "num_beam_groups": 1, "repetition_penalty": 1.0, "min_length": 0,
               "min_new_tokens": None, "encoder_no_repeat_ngram_size": 0, "diversity_penalty": 0.0,
               "renormalize_logits": False, "suppress_tokens": None, "begin_suppress_tokens": None}


def _settings(folder: Path) -> tuple[Path, dict[str, Any]] | None:
    """The file the settings come from and its fields, or None when the folder configures no decoding."""
    path = folder / FILE
    if path.exists():
        return path, read_object(path)
    path = folder / "config.json"
    config = read_object(path)
    known = {k: config[k] for k in (*FIELDS, *NOT_APPLIED) if k in config}
    return (path, known) if known else None


def _check_ids(path: Path, settings: dict[str, Any], size: int) -> None:
    for name in IDS:
        value = settings.get(name)
        values = value if name == "eos_token_id" and isinstance(value, list) and value else [value]
        for one in values if value is not None else []:
            check_ids(path, {name: one}, size)
    words = settings.get("bad_words_ids")
    if words is None:
        return
    if not (isinstance(words, list) and len(words) <= MAX_BAD_WORDS
            and all(isinstance(w, list) and 0 < len(w) <= MAX_WORD for w in words)):
        raise CheckpointError(f"{path}: field 'bad_words_ids' is {words!r:.40}, but it must list sequences of 1 to "
                              f"{MAX_WORD} token ids (at most {MAX_BAD_WORDS:,}). Fix it, or {AGAIN}.")
    for word in words:
        for token in word:
            check_ids(path, {"bad_words_ids": token}, size)


def _check(path: Path, settings: dict[str, Any], size: int) -> None:
    """Each field attnviz reads has a value transformers accepts and a sane size (the message names the field)."""
    ranges = {"num_beams": (1, MAX_BEAMS, True), "length_penalty": (-100, 100, False),
              "max_length": (2, MAX_LENGTH, True), "max_new_tokens": (1, MAX_LENGTH, True),
              "no_repeat_ngram_size": (0, MAX_NGRAM, True)}
    for name, (low, high, whole) in ranges.items():
        if settings.get(name) is not None:
            check_number(path, name, settings[name], low, high, whole)
    stopping = settings.get("early_stopping", False)
    if stopping not in (True, False, "never") or type(stopping) not in (bool, str):
        raise CheckpointError(f"{path}: field 'early_stopping' is {stopping!r:.40}, but it must be true, false or "
                              f"\"never\". Fix it, or {AGAIN}.")
    _check_ids(path, settings, size)


def _not_applied(settings: dict[str, Any]) -> list[str]:
    return [f"{name} {settings[name]!r:.40}" for name, neutral in NOT_APPLIED.items()
            if settings.get(name, neutral) not in (neutral, None) and not (name == "do_sample" and not settings[name])]


def read_generation(folder: Path, order: Sequence[int], size: int) -> dict[str, Any] | None:
    """The ``DecodeConfig`` fields the folder's authors configured (plus "notes": what is not applied), in
    attnviz's target ids (``order``: the folder's id behind each attnviz id; ``size``: the folder's target
    vocabulary), or None when the folder configures no decoding. CheckpointError names the file and field."""
    found = _settings(folder)
    if found is None:
        return None
    path, settings = found
    _check(path, settings, size)
    ours: dict[int, int] = {}
    for i, theirs in enumerate(order):
        ours.setdefault(theirs, i)  # a folder id behind two attnviz ids (Marian's <pad>, also <sos>): the first
    if len(order) > EOS_ID:  # except the end token: fairseq's </s> is behind <sos> and <eos>, and ends a sentence
        ours[order[EOS_ID]] = EOS_ID

    def mapped(theirs: int) -> int:
        if theirs not in ours:
            raise CheckpointError(f"{path}: token id {theirs} is not in the model's target vocabulary; fix it, or "
                                  f"{AGAIN}.")
        return ours[theirs]

    length = settings.get("max_length") or HF_MAX_LENGTH
    stopping = settings.get("early_stopping", False)
    fields = {"configured": True, "length_rule": "power", "beam": settings.get("num_beams") or 1,
              "length_penalty": float(settings.get("length_penalty", 1.0)),
              "max_len": settings.get("max_new_tokens") or length - 1,
              "no_repeat_ngram": settings.get("no_repeat_ngram_size") or 0,
              "early_stopping": stopping if isinstance(stopping, str) else str(stopping).lower(),
              "bad_words": [[mapped(i) for i in word] for word in settings.get("bad_words_ids") or []],
              "forced_bos": -1 if settings.get("forced_bos_token_id") is None
              else mapped(settings["forced_bos_token_id"]),
              "forced_eos": -1 if settings.get("forced_eos_token_id") is None
              else mapped(settings["forced_eos_token_id"])}
    return fields | {"notes": _not_applied(settings), "source": path.name}
