"""Frozen, validated configuration dataclasses shared by the engine, the CLI and the GUI.

Each config checks its own fields on creation (``__post_init__``) so a bad value fails where it is typed, with a
message that names the field, and round-trips through plain dicts (``to_dict``/``from_dict``) for checkpoint
metadata. What depends on a model's kind (whether the kind is registered, its own rules, training settings that
need a kind's ability) is checked one floor up, by the kind registry: ``attnviz.engine.kinds.check(cfg)``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from attnviz.engine.errors import ConfigError
from attnviz.engine.heads import KIND_ALIASES, HeadRef

C = TypeVar("C", bound="_DictMixin")


class _DictMixin:
    """To and from plain dicts (checkpoint metadata) and ``replace``, for the frozen dataclasses below."""

    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]  # what makes each subclass a dataclass to mypy

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls: type[C], data: dict[str, Any]) -> C:
        if not isinstance(data, dict):  # e.g. a recipe's "train": [] (a JSON list where the settings belong)
            raise ConfigError(f"{cls.__name__}: the settings must be a JSON object of name: value, not "
                              f"{type(data).__name__}")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ConfigError(f"{cls.__name__}: unknown setting(s) {', '.join(unknown)}; "
                              f"known: {', '.join(sorted(names))}")
        for field in dataclasses.fields(cls):
            if field.name in data:
                _check_type(field.name, str(field.type), data[field.name])
        return cls(**data)

    def replace(self: C, **changes: Any) -> C:
        return dataclasses.replace(self, **changes)


_TYPES = {"int": "a whole number", "float": "a finite number", "bool": "true or false", "str": "text"}


def _check_type(name: str, annotation: str, value: Any) -> None:
    """A plain field's value has its declared type (a checkpoint's metadata, a recipe, ``--set``, all pass here): a
    text where a number belongs ("inf", which JSON cannot spell) or an infinite number is refused by name, instead of
    failing later in a comparison or training with an infinite rate."""
    if annotation not in _TYPES:
        return
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    fits = {"int": number and isinstance(value, int), "float": number and math.isfinite(value),
            "bool": isinstance(value, bool), "str": isinstance(value, str)}[annotation]
    if not fits:
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:36] + "..."
        raise ConfigError(f"{name} must be {_TYPES[annotation]}, not {shown}")


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ConfigError(message)


SCORES = ("dot", "general", "concat")
POSITIONS = ("learned", "sinusoidal", "sinusoidal-halves", "sinusoidal-fairseq")
ACTIVATIONS = ("relu", "gelu", "gelu_new", "swish")
# The kind of a config that names none (every checkpoint before kinds existed); ``engine.kinds.transformer``
# registers it. The registry sits above the config, so the config says the default's name itself.
DEFAULT_KIND = "transformer"


@dataclass(frozen=True)
class ModelConfig(_DictMixin):
    """Architecture of one model ``kind`` (reference A's Transformer settings are the defaults).

    Which fields a kind reads, and how, is said by its registry entry (``attnviz.engine.kinds``, whose ``check``
    a config from outside passes through: a registered kind and the kind's own rules): the Transformer
    kinds read every field but ``hidden`` and ``score``; the LSTM kind reads ``d_model`` as the embedding width,
    ``hidden`` as the LSTM width and ``score`` as its attention score; a language model keeps
    ``src_vocab_size`` equal to ``tgt_vocab_size`` and reads ``max_positions`` as its context.
    """

    src_vocab_size: int
    tgt_vocab_size: int
    kind: str = DEFAULT_KIND  # a registered kind (``attnviz.engine.kinds.check`` says whether it is)
    d_model: int = 256  # D, the width of every residual stream
    enc_layers: int = 3
    dec_layers: int = 3
    heads: int = 8  # H; the head width is d_model // heads
    ff_dim: int = 512
    dropout: float = 0.1  # on embeddings, sublayer outputs and attention probabilities
    # "learned" table, fixed "sinusoidal" (sin and cos interleaved) or "sinusoidal-halves" (sin in the first half of
    # the vector, cos in the second: MarianMT's layout) or "sinusoidal-fairseq" (fairseq's: sin then cos halves,
    # frequency step log(10000) / (D/2 - 1), the first position numbered 2: M2M100 and NLLB-200)
    positions: str = "learned"
    max_positions: int = 100  # the longest sequence (with <sos>/<eos>) either side accepts
    norm: str = "post"  # "post": LN(x + f(x)) as the references; "pre": x + f(LN(x)) with a final LN
    ln_eps: float = 1e-5
    tie_output: bool = False  # share the target embedding with the output projection
    share_embeddings: bool = False  # one token embedding for source and target (needs equal vocabulary sizes)
    scale_embedding: bool = True  # multiply token embeddings by sqrt(D) before adding positions
    embed_norm: bool = False  # a LayerNorm over token + position embeddings, before dropout (mBART's)
    activation: str = "relu"  # of the feed-forward layers: "relu", "gelu", "gelu_new" (tanh approximation), "swish"
    hidden: int = 512  # recurrent kinds: LSTM state width
    score: str = "general"  # recurrent kinds: "dot" h_t.h_s, "general" h_t.W h_s, "concat" v.tanh(W[h_t; h_s])
    # Token embeddings' initial values: "xavier" like every other matrix, or "normal" N(0, D^-0.5) (Vaswani et al.).
    # Xavier over a large vocabulary makes sqrt(D)-scaled tokens about 3x smaller than sinusoidal positions, and
    # reference B's model then learned to ignore source positions (uniform cross-attention); see models/README.md.
    embed_init: str = "xavier"
    # A kind's own architecture settings beyond these fields, as plain JSON (the decoder-only LLM kind's RoPE,
    # grouped-query attention and norms: ``engine.models.llm_arch``); the kind checks them. Empty for the others.
    arch: dict[str, Any] = dataclasses.field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        _require(isinstance(self.arch, dict), f"arch must be a JSON object, not {type(self.arch).__name__}")
        _require(isinstance(self.kind, str) and bool(self.kind), f"kind must be a non-empty string, not {self.kind!r}")
        for name in ("src_vocab_size", "tgt_vocab_size", "d_model", "heads", "ff_dim", "max_positions", "hidden"):
            _require(int(getattr(self, name)) >= 1, f"{name} must be a positive integer, not {getattr(self, name)!r}")
        _require(self.enc_layers >= 0 and self.dec_layers >= 1, "need enc_layers >= 0 and dec_layers >= 1")
        _require(self.d_model % self.heads == 0, f"d_model ({self.d_model}) must be divisible by heads ({self.heads})")
        _require(0.0 <= self.dropout < 1.0, f"dropout must be in [0, 1), not {self.dropout}")
        _require(self.positions in POSITIONS, f"positions must be one of {POSITIONS}, not {self.positions!r}")
        _require(self.activation in ACTIVATIONS, f"activation must be one of {ACTIVATIONS}, not {self.activation!r}")
        _require(not self.share_embeddings or self.src_vocab_size == self.tgt_vocab_size,
                 f"share_embeddings needs equal vocabulary sizes, not {self.src_vocab_size} and {self.tgt_vocab_size}")
        _require(self.norm in ("post", "pre"), f"norm must be 'post' or 'pre', not {self.norm!r}")
        _require(self.max_positions >= 3, "max_positions must be at least 3 (<sos>, one token, <eos>)")
        _require(self.ln_eps > 0, "ln_eps must be positive")
        _require(self.score in SCORES, f"score must be one of {SCORES}, not {self.score!r}")
        _require(self.embed_init in ("xavier", "normal"),
                 f"embed_init must be 'xavier' or 'normal', not {self.embed_init!r}")

    def to_dict(self) -> dict[str, Any]:
        """The settings as plain JSON; ``arch`` only when the kind has one (checkpoints of the other kinds stay as
        they were)."""
        data = super().to_dict()
        if not data["arch"]:
            del data["arch"]
        return data


LENGTH_RULES = ("gnmt", "power")
STOPPING = ("attnviz", "true", "false", "never")


@dataclass(frozen=True)
class DecodeConfig(_DictMixin):
    """How to search for a translation."""

    max_len: int = 50  # output tokens, <eos> included
    beam: int = 1  # 1 = greedy
    length_penalty: float = 1.0  # GNMT alpha for beam search; 0 disables
    topk: int = 10  # candidates reported per step
    temperature: float = 0.0  # step-by-step decoding: 0 = greedy, > 0 = sample from softmax(logits / temperature)
    seed: int = 0  # of the sampling generator, so a sampled output can be reproduced
    sample_top_k: int = 0  # sampling draws from the k most probable tokens only (ties kept); 0: every token
    sample_top_p: float = 1.0  # sampling draws from the fewest most probable tokens holding this mass (nucleus); 1: all
    heads_off: tuple[HeadRef, ...] = ()  # attention heads switched off while decoding (``engine.search.head_mask``)
    rescale_heads: bool = False  # scale an altered layer's remaining heads by H / (H - off)
    # The search its authors configured for an imported model (its generation_config.json, read by
    # ``engine.hub.generation``), run as transformers' ``generate`` runs it (``engine.search.rules``); the defaults
    # are attnviz's own search.
    configured: bool = False  # these are the model's settings: transformers' scores (no renormalising after a ban)
    length_rule: str = "gnmt"  # "gnmt": score / ((5 + n) / 6) ** alpha; "power": score / n ** alpha (transformers)
    early_stopping: str = "attnviz"  # "attnviz" (engine.search.beam), or transformers' "true", "false", "never"
    no_repeat_ngram: int = 0  # no n-gram of this many tokens twice in an output (0: off)
    bad_words: tuple[tuple[int, ...], ...] = ()  # target id sequences an output never completes
    forced_bos: int = -1  # target id forced as the first output token (-1: none)
    forced_eos: int = -1  # target id forced at the last step the length limit allows (-1: none)

    def __post_init__(self) -> None:
        try:
            refs = tuple(sorted({HeadRef(str(k), int(la), int(h)) for k, la, h in self.heads_off}))
        except (TypeError, ValueError):
            raise ConfigError(f"heads_off must list (kind, layer, head) triples, not {self.heads_off!r}") from None
        _require(all(r.kind in KIND_ALIASES.values() and r.layer >= 0 and r.head >= 0 for r in refs),
                 f"heads_off names an unknown kind or a negative index: {refs!r}")
        object.__setattr__(self, "heads_off", refs)
        _require(self.temperature >= 0, f"temperature must be >= 0 (0 = greedy), not {self.temperature}")
        _require(self.max_len >= 1, f"max_len must be at least 1, not {self.max_len}")
        _require(isinstance(self.sample_top_k, int) and not isinstance(self.sample_top_k, bool)
                 and self.sample_top_k >= 0, f"sample_top_k must be a whole number >= 0 (0 = off), not "
                                             f"{self.sample_top_k!r}")
        _require(0 < self.sample_top_p <= 1, f"sample_top_p must be above 0 and at most 1 (1 = off), not "
                                             f"{self.sample_top_p!r}")
        _require(self.beam >= 1, f"beam must be at least 1, not {self.beam}")
        _require(self.length_penalty >= 0 or self.length_rule == "power",
                 f"length_penalty must be >= 0, not {self.length_penalty}")
        _require(self.length_rule in LENGTH_RULES,
                 f"length_rule must be one of {LENGTH_RULES}, not {self.length_rule!r}")
        _require(self.early_stopping in STOPPING, f"early_stopping must be one of {STOPPING}, not "
                                                  f"{self.early_stopping!r}")
        _require(self.no_repeat_ngram >= 0, f"no_repeat_ngram must be >= 0, not {self.no_repeat_ngram}")
        try:
            words = tuple(tuple(int(i) for i in word) for word in self.bad_words)
        except (TypeError, ValueError):
            raise ConfigError(f"bad_words must list sequences of token ids, not {self.bad_words!r:.60}") from None
        _require(all(word and min(word) >= 0 for word in words), "bad_words must list non-empty sequences of token "
                                                                 f"ids >= 0, not {words!r:.60}")
        object.__setattr__(self, "bad_words", words)
        _require(self.forced_bos >= -1 and self.forced_eos >= -1, "forced_bos and forced_eos must be token ids, or -1 "
                                                                  "for none")
        _require(self.topk >= 1, f"topk must be at least 1, not {self.topk}")


SCHEDULES = ("constant", "noam", "inverse_sqrt", "one_cycle")
WARMUP_SCHEDULES = ("noam", "inverse_sqrt")  # the schedules that read train.warmup
DEVICES = ("auto", "cpu", "cuda")
PRECISIONS = ("fp32", "bf16")  # bf16: autocast on CUDA (a CPU run of such a recipe trains in float32 and says so)


@dataclass(frozen=True)
class TrainConfig(_DictMixin):
    """How to train: optimiser, schedule, batching, evaluation and checkpoint selection."""

    epochs: int = 10
    batch_size: int = 128  # sentence pairs per batch (used when max_tokens is 0)
    max_tokens: int = 0  # token budget per batch (padded source + target tokens); 0 = batch by sentences
    bucket: bool = True  # group sentences of similar length into batches
    lr: float = 5e-4  # constant rate, or the peak of inverse_sqrt, or the factor of noam
    # "constant"; "noam": lr * D^-0.5 * min(s^-0.5, s * w^-1.5); "inverse_sqrt"; "one_cycle": cosine rise from
    # lr/25 to lr over the first 30% of the run, then cosine decay to lr/25e4 (torch's OneCycleLR)
    schedule: str = "constant"
    warmup: int = 4000  # steps of linear warm-up for noam / inverse_sqrt
    betas: tuple[float, float] = (0.9, 0.999)
    adam_eps: float = 1e-8
    weight_decay: float = 0.0
    clip_norm: float = 1.0  # 0 disables gradient-norm clipping
    label_smoothing: float = 0.0
    teacher_forcing: float = 1.0  # chance that each decoder step is fed the gold token (< 1: recurrent models only)
    seed: int = 1234
    device: str = "auto"
    threads: int = 0  # CPU threads for torch; 0 keeps torch's default
    precision: str = "fp32"  # "fp32", or "bf16": mixed precision (bfloat16 autocast) on CUDA
    eval_every: int = 0  # steps between evaluations; 0 = at the end of every epoch
    bleu_sentences: int = 0  # validation sentences decoded for BLEU at each evaluation; 0 = all
    keep_metric: str = "val_loss"  # "val_loss" (lower is better), "bleu" or "accuracy" (higher is better)
    average_last: int = 0  # at the end, average the weights of the last N epochs (0 = off)
    save_epochs: bool = False  # keep every epoch's weights next to the checkpoint (needed for averaging)

    def __post_init__(self) -> None:
        object.__setattr__(self, "betas", tuple(self.betas))
        for name in ("epochs", "batch_size"):
            _require(getattr(self, name) >= 1, f"{name} must be at least 1, not {getattr(self, name)}")
        for name in ("max_tokens", "warmup", "eval_every", "bleu_sentences", "average_last", "threads"):
            _require(getattr(self, name) >= 0, f"{name} must be >= 0, not {getattr(self, name)}")
        _require(self.lr > 0, f"lr must be positive, not {self.lr}")
        _require(self.schedule in SCHEDULES, f"schedule must be one of {SCHEDULES}, not {self.schedule!r}")
        _require(self.schedule not in WARMUP_SCHEDULES or self.warmup >= 1,
                 "warmup must be at least 1 for a warm-up schedule")
        _require(len(self.betas) == 2 and all(0 <= b < 1 for b in self.betas),
                 f"betas must be two numbers in [0, 1), not {self.betas}")
        _require(0 <= self.label_smoothing < 1, f"label_smoothing must be in [0, 1), not {self.label_smoothing}")
        _require(0 <= self.teacher_forcing <= 1, f"teacher_forcing must be in [0, 1], not {self.teacher_forcing}")
        _require(self.clip_norm >= 0, f"clip_norm must be >= 0, not {self.clip_norm}")
        _require(self.device in DEVICES, f"device must be one of {DEVICES}, not {self.device!r}")
        _require(self.precision in PRECISIONS, f"precision must be one of {PRECISIONS}, not {self.precision!r}")
        _require(self.keep_metric in ("val_loss", "bleu", "accuracy"),
                 f"keep_metric must be val_loss, bleu or accuracy, not {self.keep_metric!r}")

