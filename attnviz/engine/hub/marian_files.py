"""Reading a MarianMT (OPUS-MT) folder's files, as the Hugging Face Hub lays them out, without torch.

A folder holds ``config.json``, ``model.safetensors`` or ``pytorch_model.bin``, ``source.spm`` and ``target.spm``
(SentencePiece models), ``vocab.json`` (piece -> Marian id; ``target_vocab.json`` too when the vocabularies are
separate) and ``tokenizer_config.json``. This module reads and checks them through the shared folder checks
(``engine.checkpoints.folder``: JSON, fields, token ids, SentencePiece models), turns them into attnviz's
``ModelConfig`` (kind ``marian``), vocabularies and tokenizers, and says which tensors, under Hugging Face's
``MarianMTModel`` names, the config implies (``weight_plan``); ``engine.hub.marian`` registers the folder format and
describes a folder with them, ``engine.hub.marian_weights`` maps the weights.

Marian ids are not attnviz's: attnviz keeps its specials at fixed ids (``<unk>`` 0, ``<pad>`` 1, ``<sos>`` 2,
``<eos>`` 3), so every embedding row, output row and logit bias is permuted into attnviz's order once, with the
orders read here. ``<sos>`` takes the row of Marian's decoder start token (its ``<pad>``), ``<eos>`` the row of
``</s>``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attnviz.engine.checkpoints.folder import (
    WeightPlan,
    check_fields,
    check_ids,
    check_sentencepiece,
    read_bytes,
    read_json,
    read_object,
)
from attnviz.engine.config import ModelConfig
from attnviz.engine.errors import CheckpointError, ConfigError
from attnviz.engine.hub.families import holds
from attnviz.engine.hub.generation import read_generation
from attnviz.engine.hub.parsed import once
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
ATTENTION = ("q_proj", "k_proj", "v_proj", "out_proj")
LAYER_PARTS = {  # the parts of one layer, by Marian's names, in attnviz's order
    "encoder": ("self_attn", "self_attn_layer_norm", "fc1", "fc2", "final_layer_norm"),
    "decoder": ("self_attn", "self_attn_layer_norm", "encoder_attn", "encoder_attn_layer_norm", "fc1", "fc2",
                "final_layer_norm"),
}
EMBEDDINGS = ("model.shared.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight")
POSITIONS = {f"model.{side}.embed_positions.weight": "positions are computed (the same sinusoids), not read"
             for side in ("encoder", "decoder")}
MAX_VOCAB = 1_000_000  # far above any OPUS-MT model (58k); a larger file is damaged or not a Marian model
# attnviz's ModelConfig field -> config.json's name for it; both sides' values are checked, then must agree
FIELDS = {"d_model": "d_model", "enc_layers": "encoder_layers", "dec_layers": "decoder_layers",
          "heads": "encoder_attention_heads", "ff_dim": "encoder_ffn_dim", "max_positions": "max_position_embeddings",
          "activation": "activation_function", "scale_embedding": "scale_embedding",
          "share_embeddings": "share_encoder_decoder_embeddings", "tie_output": "tie_word_embeddings"}
DECODER_TWINS = {"heads": "decoder_attention_heads", "ff_dim": "decoder_ffn_dim"}
# The activations Marian folders use: OPUS-MT's swish (silu), tc-big's relu, transformers' default gelu.
ACTIVATIONS = ("swish", "silu", "relu", "gelu")
DEFAULTS = {"activation_function": "gelu", "scale_embedding": False, "share_encoder_decoder_embeddings": True,
            "tie_word_embeddings": True}


def model_type(folder: Path) -> str | None:
    """``config.json``'s ``model_type`` (what a Hugging Face folder says it holds); None without a readable one."""
    try:
        config = read_json(folder / "config.json")
    except CheckpointError:
        return None
    kind = config.get("model_type") if isinstance(config, dict) else None
    return kind if isinstance(kind, str) else None


def read_config(folder: Path) -> dict[str, Any]:
    """``config.json``, checked to describe a Marian model attnviz can run (CheckpointError naming what is not)."""
    config = read_object(folder / "config.json")
    if config.get("model_type") != MODEL_TYPE:
        raise CheckpointError(f"{folder} {holds(config.get('model_type'), config.get('architectures'))}, not a "
                              "MarianMT translation model; attnviz opens Marian folders such as "
                              "Helsinki-NLP/opus-mt-de-en, or its own .safetensors checkpoints.")
    missing = [name for name in REQUIRED_FILES if not (folder / name).exists()]
    if missing:
        raise CheckpointError(f"{folder} is a Marian model but lacks {', '.join(missing)}; download the whole folder "
                              "(config, weights, source.spm, target.spm, vocab.json).")
    for option, supported in SUPPORTED_VALUES.items():
        if option in config and config[option] not in (supported if isinstance(supported, tuple) else (supported,)):
            raise CheckpointError(f"{folder / 'config.json'}: field {option!r} is {config[option]!r:.40}, which "
                                  f"attnviz's Marian implementation does not support (only {supported!r}); this "
                                  "model cannot be opened.")
    path = folder / "config.json"
    missing = [own for own in [*FIELDS.values(), *DECODER_TWINS.values()] if own not in config and own not in DEFAULTS]
    if missing:
        raise CheckpointError(f"{path} lacks {missing[0]!r}, which a Marian model needs; download the model folder "
                              "again.")
    settings = {name: config.get(own, DEFAULTS.get(own)) for name, own in FIELDS.items()}
    check_fields(path, settings, FIELDS)
    for name, twin in DECODER_TWINS.items():
        check_fields(path, {name: config.get(twin)}, {name: twin})
        if config[twin] != settings[name]:
            raise CheckpointError(f"{path}: field {FIELDS[name]!r} is {settings[name]} but {twin!r} is "
                                  f"{config[twin]}; attnviz needs the encoder and decoder to agree on them.")
    return config


def read_vocab_file(path: Path) -> dict[str, int]:
    """A vocabulary file: each piece -> a distinct id from 0 up (the message names the first piece that is not)."""
    vocab = read_object(path)
    if not 0 < len(vocab) <= MAX_VOCAB:
        raise CheckpointError(f"{path} holds {len(vocab):,} pieces; a vocabulary holds 1 to {MAX_VOCAB:,}: download "
                              "the model folder again.")
    seen: set[int] = set()
    for piece, i in vocab.items():
        if type(i) is not int or not 0 <= i < len(vocab) or i in seen:
            raise CheckpointError(f"{path}: piece {piece[:40]!r} has id {i!r:.40}, but each piece needs a distinct "
                                  f"whole-number id from 0 to {len(vocab) - 1}; download the model folder again.")
        seen.add(i)
    return vocab


def attnviz_vocab(path: Path, marian: dict[str, int], pad_id: int, eos_id: int,
                  start_id: int | None = None) -> tuple[Vocab, list[int]]:
    """attnviz's vocabulary for Marian's (read from ``path``), and ``order``: the Marian id behind each attnviz
    id; ``<sos>`` takes the row of the decoder start token ``start_id`` (Marian's: ``pad_id``, the default)."""
    unk_id = marian["<unk>"]
    by_id = [""] * len(marian)  # the ids are 0 .. n - 1, each once (``read_vocab_file``): placed, not sorted
    for piece, i in marian.items():
        by_id[i] = piece
    start = pad_id if start_id is None else start_id
    kept = [i for i in range(len(by_id)) if i not in (pad_id, eos_id, unk_id)]
    for i in kept:
        if by_id[i] in SPECIALS:
            raise CheckpointError(f"{path} uses {by_id[i]!r} for an ordinary piece (id {i}); attnviz reserves it, so "
                                  "this folder cannot be opened: download the model folder again.")
    # <unk>, <pad>, <sos> (= the decoder start), <eos> (= </s>), then every other piece in Marian's order
    return Vocab([*SPECIALS, *(by_id[i] for i in kept)]), [unk_id, pad_id, start, eos_id, *kept]


def _language(code: Any, folder: Path, side: int) -> str:
    if isinstance(code, str) and re.fullmatch(r"[a-z]{2,3}", code):
        return code
    match = re.search(r"opus-mt-([a-z]{2,3})-([a-z]{2,3})$", folder.resolve().name)
    return match.group(side + 1) if match else "und"  # ISO 639 "undetermined"


def _specs(folder: Path, tokenizer_config: dict[str, Any], vocabs: tuple[dict[str, int], dict[str, int]]
           ) -> tuple[TokenizerSpec, TokenizerSpec]:
    """Both sides' tokenizers, each SentencePiece model checked to load and to belong with its vocabulary."""
    specs = []
    for side, (key, name) in enumerate((("source_lang", "source.spm"), ("target_lang", "target.spm"))):
        proto = read_bytes(folder / name)
        check_sentencepiece(folder / name, proto, vocabs[side])
        specs.append(TokenizerSpec(_language(tokenizer_config.get(key), folder, side), mode="sentencepiece",
                                   lowercase=False, model_proto=proto))
    return specs[0], specs[1]


def model_config(path: Path, config: dict[str, Any], src_size: int, tgt_size: int, shared: bool) -> ModelConfig:
    """attnviz's config of the Marian network that ``config`` (config.json, checked by ``read_config``)
    describes."""
    settings = {name: config.get(own, DEFAULTS.get(own)) for name, own in FIELDS.items()}
    settings["activation"] = {"silu": "swish"}.get(settings["activation"], settings["activation"])
    try:
        return check(ModelConfig(**settings | {"share_embeddings": shared}, src_vocab_size=src_size,
                                 tgt_vocab_size=tgt_size, kind=MARIAN.name, dropout=0.0,
                                 positions="sinusoidal-halves", norm="post"))
    except (ConfigError, TypeError, ValueError) as exc:
        raise CheckpointError(f"{path} describes a model attnviz cannot build: {exc}; fix it, or download the model "
                              "folder again.") from None


@dataclass(frozen=True)
class MarianParts:
    """Everything in a Marian folder but the weights, checked: config.json and attnviz's config of it, both
    vocabularies (Marian's and attnviz's, with the Marian id behind each attnviz id), both tokenizers."""

    folder: Path
    config: dict[str, Any]
    cfg: ModelConfig
    source: dict[str, int]  # vocab.json: piece -> Marian id
    target: dict[str, int]  # target_vocab.json when the vocabularies are separate, else vocab.json
    src_vocab: Vocab
    src_order: list[int]
    tgt_vocab: Vocab
    tgt_order: list[int]
    src_spec: TokenizerSpec
    tgt_spec: TokenizerSpec
    generation: dict[str, Any] | None  # the decoding its authors configured (``engine.hub.generation``), or None


def _tokenizer_config(folder: Path) -> dict[str, Any]:
    path = folder / "tokenizer_config.json"
    settings = read_object(path) if path.exists() else {}  # a pipe or device there is refused
    if type(settings.get("separate_vocabs", False)) is not bool:
        raise CheckpointError(f"{path}: field 'separate_vocabs' is {settings['separate_vocabs']!r:.40}, but it must "
                              "be true or false; fix it, or download the model folder again.")
    return settings


def _vocabularies(folder: Path, config: dict[str, Any], separate: bool) -> tuple[dict[str, int], dict[str, int]]:
    """vocab.json (and target_vocab.json), their sizes checked against config.json and its token ids."""
    source = read_vocab_file(folder / "vocab.json")
    target = read_vocab_file(folder / "target_vocab.json") if separate else source
    for field, vocab, name in (("vocab_size", source, "vocab.json"),
                               ("decoder_vocab_size", target, "target_vocab.json" if separate else "vocab.json")):
        if field in config and config[field] is not None and config[field] != len(vocab):
            raise CheckpointError(f"{folder / 'config.json'}: field {field!r} is {config[field]!r:.40}, but {name} "
                                  f"holds {len(vocab):,} pieces; the files do not belong together: download the "
                                  "model folder again.")
    ids = {f"{name}_token_id": config.get(f"{name}_token_id") for name in ("pad", "eos", "decoder_start")}
    check_ids(folder / "config.json", ids, min(len(source), len(target)))
    if ids["decoder_start_token_id"] != ids["pad_token_id"]:
        raise CheckpointError(f"{folder / 'config.json'}: field 'decoder_start_token_id' is "
                              f"{ids['decoder_start_token_id']} but 'pad_token_id' is {ids['pad_token_id']}; attnviz "
                              "supports Marian's usual start from <pad> only.")
    if ids["eos_token_id"] == ids["pad_token_id"]:
        raise CheckpointError(f"{folder / 'config.json'}: eos_token_id and pad_token_id are both "
                              f"{ids['pad_token_id']}; a Marian model ends sentences with </s>, not <pad>: fix it, or "
                              "download the model folder again.")
    for path, vocab in ((folder / "vocab.json", source), (folder / "target_vocab.json", target)):
        if not isinstance(vocab.get("<unk>"), int):
            raise CheckpointError(f"{path} has no <unk> piece; it is not a Marian vocabulary.")
    return source, target


@once
def folder_parts(folder: str | Path) -> MarianParts:
    """Everything but the weights, read and checked (CheckpointError naming the file and field otherwise)."""
    folder = Path(folder)
    config = read_config(folder)
    tokenizer_config = _tokenizer_config(folder)
    separate = tokenizer_config.get("separate_vocabs", False) and (folder / "target_vocab.json").exists()
    source, target = _vocabularies(folder, config, separate)
    pad, eos = config["pad_token_id"], config["eos_token_id"]
    src_vocab, src_order = attnviz_vocab(folder / "vocab.json", source, pad, eos)
    tgt_vocab, tgt_order = (attnviz_vocab(folder / "target_vocab.json", target, pad, eos) if separate
                            else (src_vocab, src_order))  # one vocab.json: the same 58k-piece reading, made once
    src_spec, tgt_spec = _specs(folder, tokenizer_config, (source, target))
    shared = config.get("share_encoder_decoder_embeddings", True) and src_order == tgt_order
    cfg = model_config(folder / "config.json", config, len(src_vocab), len(tgt_vocab), shared)
    generation = read_generation(folder, tgt_order, len(target))
    return MarianParts(folder, config, cfg, source, target, src_vocab, src_order, tgt_vocab, tgt_order, src_spec,
                       tgt_spec, generation)


def layer_shapes(prefix: str, part: str, d: int, ff: int) -> dict[str, list[int]]:
    if part.endswith("attn"):
        return {f"{prefix}.{p}.{param}": [d, d] if param == "weight" else [d]
                for p in ATTENTION for param in ("weight", "bias")}
    if part.endswith("norm"):
        return {f"{prefix}.weight": [d], f"{prefix}.bias": [d]}
    rows, cols = (ff, d) if part == "fc1" else (d, ff)
    return {f"{prefix}.weight": [rows, cols], f"{prefix}.bias": [rows]}


def weight_plan(parts: MarianParts, weights: Path) -> WeightPlan:
    """Every tensor ``parts``' config implies, under Hugging Face's names, with its shape: each layer's, the
    embeddings (``model.shared`` or the sides' copies when shared), the output (``lm_head`` unless tied to the target
    embedding) and its bias; the stored position tables are known and not read."""
    cfg, d = parts.cfg, parts.cfg.d_model
    required: dict[str, list[int]] = {}
    for side, layers in (("encoder", cfg.enc_layers), ("decoder", cfg.dec_layers)):
        for i in range(layers):
            for part in LAYER_PARTS[side]:
                required |= layer_shapes(f"model.{side}.layers.{i}.{part}", part, d, cfg.ff_dim)
    src_rows, tgt_rows = len(parts.source), len(parts.target)
    optional = {"final_logits_bias": [1, tgt_rows]}
    unused = dict(POSITIONS)
    shapes = dict(zip(EMBEDDINGS, ([src_rows, d], [src_rows, d], [tgt_rows, d]), strict=True))
    either: tuple[tuple[str, ...], ...] = ()
    if cfg.share_embeddings:
        optional |= shapes
        either = (EMBEDDINGS,)
    else:
        required |= {name: shapes[name] for name in EMBEDDINGS[1:]}
        unused[EMBEDDINGS[0]] = "the embeddings are not shared (share_encoder_decoder_embeddings), so not read"
    if cfg.tie_output:
        unused["lm_head.weight"] = "the output is tied to the target embedding (tie_word_embeddings), so not read"
    else:
        required["lm_head.weight"] = [tgt_rows, d]
    return WeightPlan(weights, required, optional, either, unused)


def weights_file(folder: Path) -> Path:
    path = next((folder / name for name in WEIGHT_FILES if (folder / name).exists()), None)
    if path is None:
        raise CheckpointError(f"{folder} has no weights: it needs model.safetensors or pytorch_model.bin; download "
                              "the whole folder.")
    return path
