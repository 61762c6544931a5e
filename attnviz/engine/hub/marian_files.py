"""Reading a MarianMT (OPUS-MT) folder's files, as the Hugging Face Hub lays them out, without torch.

A folder holds ``config.json``, ``model.safetensors`` or ``pytorch_model.bin``, ``source.spm`` and ``target.spm``
(SentencePiece models), ``vocab.json`` (piece -> Marian id; ``target_vocab.json`` too when the vocabularies are
separate) and ``tokenizer_config.json``. This module checks ``config.json`` and turns the rest into attnviz's
``ModelConfig`` (kind ``marian``), vocabularies and tokenizers; ``engine.hub.marian`` registers the folder format
and describes a folder with them, ``engine.hub.marian_weights`` maps the weights.

Marian ids are not attnviz's: attnviz keeps its specials at fixed ids (``<unk>`` 0, ``<pad>`` 1, ``<sos>`` 2,
``<eos>`` 3), so every embedding row, output row and logit bias is permuted into attnviz's order once, with the
orders read here. ``<sos>`` takes the row of Marian's decoder start token (its ``<pad>``), ``<eos>`` the row of
``</s>``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from attnviz.engine.config import ModelConfig
from attnviz.engine.errors import CheckpointError, ConfigError
from attnviz.engine.kinds import check
from attnviz.engine.kinds.marian import MARIAN
from attnviz.engine.text.tokenize import TokenizerSpec
from attnviz.engine.text.vocab import SPECIALS, Vocab

MODEL_TYPE = "marian"  # config.json's model_type of a Marian folder (Hugging Face's name for the architecture)
REQUIRED_FILES = ("config.json", "source.spm", "target.spm", "vocab.json")
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
# Options of other BART-family models that a Marian config may carry; attnviz implements only Marian's values.
SUPPORTED_VALUES = {"normalize_before": False, "add_final_layer_norm": False, "normalize_embedding": False,
                    "static_position_embeddings": True, "add_bias_logits": False, "scale_embedding": (True, False)}
MAX_VOCAB = 1_000_000  # far above any OPUS-MT model (58k); a larger file is damaged or not a Marian model


def model_type(folder: Path) -> str | None:
    """``config.json``'s ``model_type`` (what a Hugging Face folder says it holds); None without a readable one."""
    try:
        config = _json(folder / "config.json")
    except CheckpointError:
        return None
    kind = config.get("model_type") if isinstance(config, dict) else None
    return kind if isinstance(kind, str) else None


def holds(kind: Any) -> str:
    """What a folder whose config.json gives this model_type holds, in words."""
    return f"holds a {kind or 'unknown'!r} model (config.json model_type)"


def _json(path: Path) -> Any:
    """A folder's JSON file; CheckpointError for anything unreadable: bad bytes or syntax, nesting too deep for the
    parser (RecursionError), a number too long to convert (ValueError)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)[:200]
        raise CheckpointError(f"{path} cannot be read as JSON ({reason}); download the model folder again.") from None


def read_config(folder: Path) -> dict[str, Any]:
    """``config.json``, checked to describe a Marian model attnviz can run (CheckpointError naming what is not)."""
    config = _json(folder / "config.json")
    if not isinstance(config, dict):
        raise CheckpointError(f"{folder / 'config.json'} is not a JSON object; this is not a model folder.")
    if config.get("model_type") != MODEL_TYPE:
        raise CheckpointError(f"{folder} {holds(config.get('model_type'))}, not a "
                              "MarianMT translation model; attnviz opens Marian folders such as "
                              "Helsinki-NLP/opus-mt-de-en, or its own .safetensors checkpoints.")
    missing = [name for name in REQUIRED_FILES if not (folder / name).is_file()]
    if missing:
        raise CheckpointError(f"{folder} is a Marian model but lacks {', '.join(missing)}; download the whole folder "
                              "(config, weights, source.spm, target.spm, vocab.json).")
    for option, supported in SUPPORTED_VALUES.items():
        if option in config and config[option] not in (supported if isinstance(supported, tuple) else (supported,)):
            raise CheckpointError(f"{folder}: config.json sets {option} = {config[option]!r}, which attnviz's Marian "
                                  f"implementation does not support (only {supported!r}).")
    for enc, dec in (("encoder_attention_heads", "decoder_attention_heads"), ("encoder_ffn_dim", "decoder_ffn_dim")):
        if config.get(enc) != config.get(dec):
            raise CheckpointError(f"{folder}: config.json has {enc} = {config.get(enc)} but {dec} = {config.get(dec)}; "
                                  "attnviz needs the encoder and decoder to agree on them.")
    return config


def _vocab_file(path: Path) -> dict[str, int]:
    vocab = _json(path)
    if (not isinstance(vocab, dict) or not 0 < len(vocab) <= MAX_VOCAB
            or not all(isinstance(i, int) and 0 <= i < len(vocab) for i in vocab.values())
            or len(set(vocab.values())) != len(vocab)):
        raise CheckpointError(f"{path} is not a vocabulary (a JSON object mapping each piece to a distinct id "
                              "from 0 up); download the model folder again.")
    return vocab


def attnviz_vocab(marian: dict[str, int], pad_id: int, eos_id: int, unk_id: int) -> tuple[Vocab, list[int]]:
    """attnviz's vocabulary for Marian's, and ``order``: the Marian id behind each attnviz id."""
    by_id = sorted(marian.items(), key=lambda kv: kv[1])
    order = [unk_id, pad_id, pad_id, eos_id]  # <unk>, <pad>, <sos> (= Marian's decoder start), <eos> (= </s>)
    pieces = list(SPECIALS)
    for piece, i in by_id:
        if i in (pad_id, eos_id, unk_id):
            continue
        if piece in SPECIALS:
            raise CheckpointError(f"the vocabulary uses {piece!r} for an ordinary piece (id {i}); attnviz reserves it")
        pieces.append(piece)
        order.append(i)
    return Vocab(pieces), order


def _language(code: Any, folder: Path, side: int) -> str:
    if isinstance(code, str) and re.fullmatch(r"[a-z]{2,3}", code):
        return code
    match = re.search(r"opus-mt-([a-z]{2,3})-([a-z]{2,3})$", folder.resolve().name)
    return match.group(side + 1) if match else "und"  # ISO 639 "undetermined"


def _specs(folder: Path, tokenizer_config: dict[str, Any]) -> tuple[TokenizerSpec, TokenizerSpec]:
    langs = [_language(tokenizer_config.get(key), folder, side)
             for side, key in enumerate(("source_lang", "target_lang"))]
    src, tgt = (TokenizerSpec(lang, mode="sentencepiece", lowercase=False, model_proto=(folder / name).read_bytes())
                for lang, name in zip(langs, ("source.spm", "target.spm"), strict=True))
    return src, tgt


def model_config(config: dict[str, Any], src_size: int, tgt_size: int, shared: bool, tied: bool) -> ModelConfig:
    """attnviz's config of the Marian network that ``config`` (config.json) describes."""
    try:
        return check(ModelConfig(
            src_vocab_size=src_size, tgt_vocab_size=tgt_size, kind=MARIAN.name, d_model=int(config["d_model"]),
            enc_layers=int(config["encoder_layers"]), dec_layers=int(config["decoder_layers"]),
            heads=int(config["encoder_attention_heads"]), ff_dim=int(config["encoder_ffn_dim"]), dropout=0.0,
            positions="sinusoidal-halves", max_positions=int(config["max_position_embeddings"]), norm="post",
            tie_output=tied, share_embeddings=shared, scale_embedding=bool(config.get("scale_embedding", False)),
            activation={"silu": "swish"}.get(config.get("activation_function", "gelu"),
                                             config.get("activation_function", "gelu"))))
    except KeyError as exc:
        raise CheckpointError(f"config.json lacks {exc.args[0]!r}, which a Marian model needs.") from None
    except (ConfigError, TypeError, ValueError) as exc:
        raise CheckpointError(f"config.json describes a model attnviz cannot build: {exc}") from None


def folder_parts(folder: str | Path) -> tuple[dict[str, Any], Vocab, list[int], Vocab, list[int], TokenizerSpec,
                                             TokenizerSpec]:
    """Everything but the weights: config.json, both vocabularies with their Marian id orders, both tokenizers."""
    folder = Path(folder)
    config = read_config(folder)
    tokenizer_config = _json(folder / "tokenizer_config.json") if (folder / "tokenizer_config.json").is_file() else {}
    ids = {name: config.get(f"{name}_token_id") for name in ("pad", "eos", "decoder_start")}
    pad, eos, start = ids.values()
    if not (isinstance(pad, int) and isinstance(eos, int) and isinstance(start, int)):
        raise CheckpointError(f"{folder}: config.json must give integer pad_token_id, eos_token_id and "
                              f"decoder_start_token_id (got {ids}).")
    if start != pad:
        raise CheckpointError(f"{folder}: decoder_start_token_id {start} differs from pad_token_id {pad}; attnviz "
                              "supports Marian's usual start from <pad> only.")
    source = _vocab_file(folder / "vocab.json")
    separate = bool(tokenizer_config.get("separate_vocabs")) and (folder / "target_vocab.json").is_file()
    target = _vocab_file(folder / "target_vocab.json") if separate else source
    unk = source.get("<unk>")
    if not isinstance(unk, int):
        raise CheckpointError(f"{folder / 'vocab.json'} has no <unk> piece; it is not a Marian vocabulary.")
    src_vocab, src_order = attnviz_vocab(source, pad, eos, unk)
    tgt_vocab, tgt_order = attnviz_vocab(target, pad, eos, target.get("<unk>", unk))
    src_spec, tgt_spec = _specs(folder, tokenizer_config if isinstance(tokenizer_config, dict) else {})
    return config, src_vocab, src_order, tgt_vocab, tgt_order, src_spec, tgt_spec
