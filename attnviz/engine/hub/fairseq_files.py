"""Reading the folders of fairseq's multilingual translation models (M2M100, NLLB-200, mBART-50), as the Hugging
Face Hub lays them out, without torch: shared by the ``m2m_100`` and ``mbart`` folder formats.

A folder holds ``config.json``, ``model.safetensors`` or ``pytorch_model.bin``, ``sentencepiece.bpe.model`` (one
SentencePiece model for every language), ``tokenizer_config.json`` (its ``tokenizer_class`` names the family) and,
for M2M100, ``vocab.json``. Token ids are fairseq's: ``<s>`` 0, ``<pad>`` 1, ``</s>`` 2, ``<unk>`` 3, then the
pieces (NLLB and mBART: SentencePiece id + 1; M2M100: ``vocab.json``), then the family's language tags in their
published order (``engine.text.language_codes``), then ``<mask>`` and filler entries up to ``vocab_size``. Every file
is read and checked through the shared folder checks (``engine.checkpoints.folder``). attnviz's vocabulary keeps its
specials at fixed ids, so rows are reordered once (``marian_files.attnviz_vocab``): ``<sos>`` and ``<eos>`` both take
``</s>``'s row, since decoding starts from ``</s>`` (``decoder_start_token_id``) and ends at it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attnviz.engine.checkpoints.folder import (
    AGAIN,
    WeightPlan,
    check_fields,
    check_sentencepiece,
    load_sentencepiece,
    read_bytes,
    read_object,
)
from attnviz.engine.config import ModelConfig
from attnviz.engine.errors import CheckpointError, ConfigError
from attnviz.engine.hub.generation import read_generation
from attnviz.engine.hub.marian_files import (
    DECODER_TWINS,
    LAYER_PARTS,
    MAX_VOCAB,
    attnviz_vocab,
    layer_shapes,
    read_vocab_file,
)
from attnviz.engine.hub.parsed import once
from attnviz.engine.kinds import check
from attnviz.engine.kinds.m2m100 import M2M100 as M2M100_KIND
from attnviz.engine.kinds.mbart import MBART as MBART_KIND
from attnviz.engine.text.language_codes import M2M100_CODES, MBART50_CODES, NLLB_CODES, WMT21_CODES
from attnviz.engine.text.languages import Languages, iso
from attnviz.engine.text.tokenize import MULTILINGUAL, TokenizerSpec
from attnviz.engine.text.vocab import Vocab

SPM = "sentencepiece.bpe.model"
FAIRSEQ_SPECIALS = ("<s>", "<pad>", "</s>", "<unk>")  # ids 0-3 in every fairseq dictionary
FIXED_IDS = {"bos_token_id": 0, "pad_token_id": 1, "eos_token_id": 2, "decoder_start_token_id": 2}
# attnviz's ModelConfig field -> config.json's name (share_embeddings: these models always share one table)
FIELDS = {"d_model": "d_model", "enc_layers": "encoder_layers", "dec_layers": "decoder_layers",
          "heads": "encoder_attention_heads", "ff_dim": "encoder_ffn_dim", "max_positions": "max_position_embeddings",
          "activation": "activation_function", "scale_embedding": "scale_embedding",
          "tie_output": "tie_word_embeddings"}
EMBEDDINGS = ("model.shared.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight")
LEARNED_OFFSET = 2  # mBART's learned position table starts its rows at 2 (fairseq's pad id + 1)


@dataclass(frozen=True)
class Family:
    """One model family read by these formats: its language tags and its network's options."""

    title: str  # "NLLB-200"
    model_type: str  # config.json's model_type
    kind: str  # attnviz's model kind (engine.kinds)
    tags: tuple[str, ...]  # language tags, in id order
    vocab_json: bool  # pieces' ids from vocab.json (M2M100) instead of SentencePiece id + 1
    positions: str  # attnviz's positions setting
    embed_norm: bool  # layernorm_embedding over token + position embeddings (mBART)
    activation: str  # config.json's default activation_function, the only one the family's models use


M2M100_TYPE, MBART_TYPE = "m2m_100", "mbart"  # config.json's model_type of each format's folders
FAIRSEQ_POSITIONS = "sinusoidal-fairseq"
NLLB = Family("NLLB-200", M2M100_TYPE, M2M100_KIND.name, NLLB_CODES, False, FAIRSEQ_POSITIONS, False, "relu")
M2M100 = Family("M2M100", M2M100_TYPE, M2M100_KIND.name, tuple(f"__{c}__" for c in M2M100_CODES), True,
                FAIRSEQ_POSITIONS, False, "relu")
WMT21 = Family("M2M100 (WMT21)", M2M100_TYPE, M2M100_KIND.name, tuple(f"__{c}__" for c in WMT21_CODES), True,
               FAIRSEQ_POSITIONS, False, "relu")
MBART50 = Family("mBART-50", MBART_TYPE, MBART_KIND.name, MBART50_CODES, False, "learned", True, "gelu")
MBART25 = Family("mBART (25 languages)", MBART_TYPE, MBART_KIND.name, MBART50_CODES[:25], False, "learned", True,
                 "gelu")
TOKENIZER_CLASSES = {"NllbTokenizer": NLLB, "NllbTokenizerFast": NLLB, "M2M100Tokenizer": M2M100,
                     "MBart50Tokenizer": MBART50, "MBart50TokenizerFast": MBART50, "MBartTokenizer": MBART25,
                     "MBartTokenizerFast": MBART25}


def tokenizer_config(folder: Path) -> dict[str, Any]:
    path = folder / "tokenizer_config.json"
    return read_object(path) if path.exists() else {}  # a pipe or device there is refused


def family_of(folder: Path, model_type: str, settings: dict[str, Any]) -> Family:
    """The family a folder of ``model_type`` holds: its tokenizer class says; without one, M2M100 when it has a
    vocab.json, else NLLB-200 (``m2m_100``), or mBART-50 (``mbart``)."""
    name = settings.get("tokenizer_class")
    family = TOKENIZER_CLASSES.get(name) if isinstance(name, str) else None
    if family is None:
        family = (M2M100 if (folder / "vocab.json").exists() else NLLB) if model_type == M2M100_TYPE else MBART50
    if family is M2M100 and settings.get("language_codes") == "wmt21":
        family = WMT21
    if family.model_type != model_type:
        raise CheckpointError(f"{folder / 'tokenizer_config.json'}: field 'tokenizer_class' is {name!r}, a tokenizer "
                              f"of {family.title}, but config.json holds a {model_type!r} model; {AGAIN}.")
    return family


def read_config(folder: Path, family: Family) -> dict[str, Any]:
    """``config.json``, checked to describe a network attnviz can run (CheckpointError naming the field)."""
    path = folder / "config.json"
    config = read_object(path)
    missing = [own for own in [*FIELDS.values(), *DECODER_TWINS.values(), "vocab_size"]
               if own not in config and own not in ("activation_function", "scale_embedding", "tie_word_embeddings")]
    if missing:
        raise CheckpointError(f"{path} lacks {missing[0]!r}, which a {family.title} model needs; {AGAIN}.")
    settings = config_settings(config, family)
    check_fields(path, settings, FIELDS)
    for name, twin in DECODER_TWINS.items():
        check_fields(path, {name: config[twin]}, {name: twin})
        if config[twin] != settings[name]:
            raise CheckpointError(f"{path}: field {FIELDS[name]!r} is {settings[name]} but {twin!r} is "
                                  f"{config[twin]}; attnviz needs the encoder and decoder to agree on them.")
    size = config["vocab_size"]
    if type(size) is not int or not 1 <= size <= MAX_VOCAB:
        raise CheckpointError(f"{path}: field 'vocab_size' is {size!r:.40}, but it must be a whole number from 1 to "
                              f"{MAX_VOCAB:,}; fix it, or {AGAIN}.")
    for field, wanted in FIXED_IDS.items():
        value = config.get(field, wanted)
        if value is not None and (type(value) is not int or value != wanted):
            raise CheckpointError(f"{path}: field {field!r} is {value!r:.40}, but a {family.title} model uses "
                                  f"fairseq's token ids (<s> 0, <pad> 1, </s> 2, decoding from </s>): {wanted}; "
                                  f"{AGAIN}.")
    return config


def config_settings(config: dict[str, Any], family: Family) -> dict[str, Any]:
    defaults = {"activation_function": family.activation, "scale_embedding": False, "tie_word_embeddings": True}
    return {name: config.get(own, defaults.get(own)) for name, own in FIELDS.items()}


def _spm_names(path: Path, proto: bytes) -> list[str]:
    """The pieces of a fairseq SentencePiece model by fairseq id (``<unk>`` 0, ``<s>`` 1, ``</s>`` 2 in the model,
    so piece i >= 3 has id i + 1)."""
    sp = load_sentencepiece(path, proto)
    if sp.get_piece_size() < 4 or not (sp.is_unknown(0) and sp.is_control(1) and sp.is_control(2)):
        raise CheckpointError(f"{path} does not begin with <unk>, <s>, </s> as a fairseq SentencePiece model does; "
                              f"it is not this model's tokenizer: {AGAIN}.")
    return [*FAIRSEQ_SPECIALS, *(sp.id_to_piece(i) for i in range(3, sp.get_piece_size()))]


def fairseq_names(folder: Path, family: Family, proto: bytes, size: int) -> list[str]:
    """Every entry of the model's vocabulary by fairseq id, ``size`` (config.json's vocab_size) in all."""
    if family.vocab_json:
        vocab = read_vocab_file(folder / "vocab.json")
        names = [piece for piece, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
        if tuple(names[:4]) != FAIRSEQ_SPECIALS:
            raise CheckpointError(f"{folder / 'vocab.json'} does not begin with {', '.join(FAIRSEQ_SPECIALS)} (ids "
                                  f"0-3) as a fairseq dictionary does; {AGAIN}.")
        names += family.tags
    else:
        names = _spm_names(folder / SPM, proto) + list(family.tags) + ["<mask>"]
    if len(names) > size:
        raise CheckpointError(f"{folder / 'config.json'}: field 'vocab_size' is {size}, but the tokenizer and the "
                              f"{len(family.tags)} language tags of {family.title} need {len(names)} entries; {AGAIN}.")
    names += [f"<madeupword{i}>" for i in range(size - len(names))]  # fairseq's filler entries
    if len(set(names)) != len(names):
        raise CheckpointError(f"{folder / SPM} holds a piece that is also a language tag or special token; the "
                              f"tokenizer is not this model's: {AGAIN}.")
    return names


def _check_added_tokens(folder: Path, settings: dict[str, Any], names: list[str]) -> None:
    """Where tokenizer_config.json lists its special tokens' ids, they must be the ids attnviz reads them at."""
    added = settings.get("added_tokens_decoder")
    if not isinstance(added, dict):
        return
    for key, entry in added.items():
        content = entry.get("content") if isinstance(entry, dict) else None
        if not isinstance(content, str) or not key.isdigit() or content.startswith("<madeupword"):
            continue
        if int(key) >= len(names) or names[int(key)] != content:
            raise CheckpointError(f"{folder / 'tokenizer_config.json'}: token {content[:40]!r} has id {key[:12]}, "
                                  "but the model family's dictionary gives it another; attnviz cannot read a "
                                  f"tokenizer with added or moved tokens: {AGAIN}.")


def _languages(folder: Path, settings: dict[str, Any], family: Family) -> Languages:
    legacy = settings.get("legacy_behaviour", False)
    if type(legacy) is not bool:
        raise CheckpointError(f"{folder / 'tokenizer_config.json'}: field 'legacy_behaviour' is {legacy!r:.40}, but "
                              f"it must be true or false; fix it, or {AGAIN}.")
    base = Languages(family.tags, family.tags[0], None, legacy and family is NLLB)
    return base.choose(tgt="en") if any(iso(t) == "en" for t in family.tags) else base


@dataclass(frozen=True)
class FairseqParts:
    """Everything in a folder but the weights, checked: the family, config.json and attnviz's config of it, the
    vocabulary by fairseq id and attnviz's (with the fairseq id behind each attnviz id), the tokenizer, the
    languages."""

    folder: Path
    family: Family
    config: dict[str, Any]
    cfg: ModelConfig
    names: list[str]  # fairseq id -> entry
    vocab: Vocab
    order: list[int]  # attnviz id -> fairseq id
    spec: TokenizerSpec
    languages: Languages
    generation: dict[str, Any] | None = None  # the decoding its authors configured (``fairseq_generation``)

    def metadata(self) -> dict[str, Any]:
        """What a checkpoint's metadata says of this model (a card, a converted file)."""
        spec = self.spec.to_dict()
        return {"name": self.folder.resolve().name, "model": self.cfg.to_dict(), "src_vocab": self.vocab.to_list(),
                "tgt_vocab": self.vocab.to_list(), "src_tokenizer": spec | {"lang": MULTILINGUAL},
                "tgt_tokenizer": spec | {"lang": iso(self.languages.tgt)}, "languages": self.languages.to_dict(),
                "imported_from": f"{self.family.title} folder", "generation": self.generation}


@once
def folder_parts(folder: str | Path, model_type: str) -> FairseqParts:
    """Everything but the weights, read and checked (CheckpointError naming the file and field otherwise)."""
    folder = Path(folder)
    settings = tokenizer_config(folder)
    family = family_of(folder, model_type, settings)
    config = read_config(folder, family)
    missing = [name for name in (SPM, "vocab.json" if family.vocab_json else SPM) if not (folder / name).exists()]
    if missing:
        raise CheckpointError(f"{folder} is a {family.title} model but lacks {missing[0]}; download the whole folder "
                              f"(config, weights, {SPM}{', vocab.json' if family.vocab_json else ''}, tokenizer "
                              "files).")
    proto = read_bytes(folder / SPM)
    names = fairseq_names(folder, family, proto, config["vocab_size"])
    check_sentencepiece(folder / SPM, proto, set(names))
    _check_added_tokens(folder, settings, names)
    vocab, order = attnviz_vocab(folder / ("vocab.json" if family.vocab_json else SPM), dict(zip(
        names, range(len(names)), strict=True)), 1, 2, 2)
    cfg = model_config(folder / "config.json", config, family, len(vocab))
    spec = TokenizerSpec(MULTILINGUAL, mode="sentencepiece", lowercase=False, model_proto=proto)
    return FairseqParts(folder, family, config, cfg, names, vocab, order, spec, _languages(folder, settings, family),
                        fairseq_generation(folder, order, len(names)))


def fairseq_generation(folder: Path, order: list[int], size: int) -> dict[str, Any] | None:
    """The decoding the folder's authors configured (``engine.hub.generation``), its first token left to the
    languages: the target language chosen (``--tgt-lang``, the language row) is the forced first token, as
    transformers' ``forced_bos_token_id`` forces it, so a ``forced_bos_token_id`` in the file (mBART-50
    many-to-one's ``en_XX``) gives way to it."""
    generation = read_generation(folder, order, size)
    return None if generation is None else generation | {"forced_bos": -1}


def model_config(path: Path, config: dict[str, Any], family: Family, size: int) -> ModelConfig:
    """attnviz's config of the network ``config`` (checked by ``read_config``) describes: pre-LN layers with a
    final LayerNorm after each stack, one embedding table for both sides."""
    settings = config_settings(config, family)
    try:
        return check(ModelConfig(**settings, src_vocab_size=size, tgt_vocab_size=size, share_embeddings=True,
                                 kind=family.kind, dropout=0.0, positions=family.positions, norm="pre",
                                 embed_norm=family.embed_norm))
    except (ConfigError, TypeError, ValueError) as exc:
        raise CheckpointError(f"{path} describes a model attnviz cannot build: {exc}; fix it, or {AGAIN}.") from None


def weight_plan(parts: FairseqParts, weights: Path) -> WeightPlan:
    """Every tensor the config implies, under Hugging Face's names, with its shape: each layer's, the final layer
    norms, the shared embedding (``model.shared`` or the sides' copies), mBART's learned positions (2 rows more than
    positions: fairseq's offset), ``layernorm_embedding`` and ``final_logits_bias``; computed position tables are
    known and not read."""
    cfg, d, rows = parts.cfg, parts.cfg.d_model, len(parts.names)
    required: dict[str, list[int]] = {}
    unused: dict[str, str] = {}
    for side, layers in (("encoder", cfg.enc_layers), ("decoder", cfg.dec_layers)):
        for i in range(layers):
            for part in LAYER_PARTS[side]:
                required |= layer_shapes(f"model.{side}.layers.{i}.{part}", part, d, cfg.ff_dim)
        required |= layer_shapes(f"model.{side}.layer_norm", "layer_norm", d, cfg.ff_dim)
        if cfg.embed_norm:
            required |= layer_shapes(f"model.{side}.layernorm_embedding", "layer_norm", d, cfg.ff_dim)
        if cfg.positions == "learned":
            required[f"model.{side}.embed_positions.weight"] = [cfg.max_positions + LEARNED_OFFSET, d]
        else:
            for name in ("weights", "_float_tensor"):  # older saves kept the computed table or fairseq's marker
                unused[f"model.{side}.embed_positions.{name}"] = "positions are computed (the same sinusoids)"
    optional = {name: [rows, d] for name in EMBEDDINGS} | {"final_logits_bias": [1, rows]}
    if cfg.tie_output:
        unused["lm_head.weight"] = "the output is tied to the embedding (tie_word_embeddings), so not read"
    else:
        required["lm_head.weight"] = [rows, d]
    return WeightPlan(weights, required, optional, (EMBEDDINGS,), unused)
