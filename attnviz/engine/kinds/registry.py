"""The model-kind registry: one ``ModelKind`` entry per kind, holding everything that depends on the kind.

A kind registers itself from its own module in this package (``register(ModelKind(...))`` at import time); the
package's modules are discovered the first time anyone asks (an ``engine.plugins.Registry``), so adding a kind is
adding a module here (plus its network in ``engine.models`` when it needs a new one). Code elsewhere asks the
registry (``kind_of(cfg)``, ``get_kind(name)``, ``all_kinds()``) and never compares kind names. The registry sits
above the config: a ``ModelConfig`` checks only its own fields, and every config that comes from outside (a
checkpoint, a recipe, a form, an imported folder) passes ``check(cfg)``: a registered kind, and that kind's own
rules; ``check_training`` says which training settings a kind cannot follow. The registry is torch-free: ``build``
imports the network only when it is called, so the model picker and ``attnviz info`` describe checkpoints without
loading torch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from attnviz.engine.config import ModelConfig, TrainConfig
from attnviz.engine.errors import ConfigError
from attnviz.engine.events import ATTENTION_KINDS, AttentionKind
from attnviz.engine.plugins import Registry

if TYPE_CHECKING:  # the network's type only: nothing here imports torch
    from attnviz.engine.models.protocol import IncrementalModel

Layout = dict[str, tuple[int, int]]  # attention kind -> (layers, heads)


def _no_checks(cfg: ModelConfig) -> None:
    """A kind with no settings that must agree with each other beyond ``ModelConfig``'s own checks."""


def _no_groups(cfg: ModelConfig) -> int:
    """Every head has its own keys and values."""
    return 0


def _no_window(cfg: ModelConfig, kind: str, layer: int, src_len: int, rows: int, cols: int) -> None:
    """Every layer sees every position."""
    return None


@dataclass(frozen=True)
class ModelKind:
    """Everything the engine, the CLI and the GUI need to know about one kind of model."""

    name: str  # stored in checkpoints as ``model.kind``
    title: str  # what the kind is, in words ("Transformer encoder-decoder")
    attention_kinds: tuple[str, ...]  # of ``engine.events.ATTENTION_KINDS``, in display order
    has_source: bool  # False for a language model, which continues a prefix instead of translating
    build: Callable[[ModelConfig], IncrementalModel]  # the network, freshly initialised; imports torch when called
    layout: Callable[[ModelConfig], Layout]  # layers and heads of each attention kind it produces
    describe: Callable[[ModelConfig], str]  # its architecture in one line, for ``attnviz info``
    unused_settings: frozenset[str] = frozenset()  # recipe settings it ignores (the Train tab does not offer them)
    validate: Callable[[ModelConfig], None] = _no_checks  # settings valid alone but not together for this kind
    short_label: str = ""  # how a model list marks it beside its languages ("LSTM"); empty for none
    teacher_forcing: bool = False  # can train with a teacher-forcing ratio below 1 (feeds its own predictions)
    source_bos: bool = True  # reads the source as <sos> tokens <eos>; False: tokens <eos> (MarianMT)
    # settings (over ModelConfig's defaults) of a small working model of this kind, built in milliseconds: what
    # the registry-wide tests, the toy models of the test suite and quick benchmarks build
    example_settings: Mapping[str, Any] = field(default_factory=dict)
    # a decoder-only model reading its source as a prompt: the source's last token is the first decoder input (as
    # <sos> is an encoder-decoder's), so the source it attends to is one token shorter than the one it reads; and
    # its decoder and cross rows are the two parts of one softmax, which sum to 1 together, not each
    reads_prompt: bool = False
    # ``--dtype auto`` runs its weights at their stored precision on the CPU too (an LLM's bf16 weights would take
    # twice the memory in float32); else auto means float32 on the CPU, where half precision is slower
    stored_precision: bool = False
    # decoding runs on a CUDA GPU (``load_translator(..., device="cuda")``): every tensor its network and search make
    # is made on the model's device; other kinds decode on the CPU only
    runs_on_gpu: bool = False
    # the attention kinds whose probe points carry a kind's heads, when they are not its own (a decoder-only LLM's
    # one attention runs in the prompt's pass, named as an encoder's, and in the output steps, as a decoder's; its
    # cross kind is a view of the steps): a head switched off in any view is off in every pass
    same_heads: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # how its views name an attention kind when ``ATTENTION_KINDS``'s words do not fit it (an LLM's "cross" is its
    # output attending over the prompt)
    views: Mapping[str, AttentionKind] = field(default_factory=dict)
    # key/value heads under grouped-query attention (0: every head its own)
    kv_heads: Callable[[ModelConfig], int] = _no_groups
    # [rows, cols] True at the cells of one sentence's map (kind, layer, source length, rows, cols) that a sliding
    # attention window leaves out (zero by construction); None where the layer sees everything
    outside_window: Callable[[ModelConfig, str, int, int, int, int], Any] = _no_window
    # the precision its captured maps are kept at in the events ("float16" for an LLM: half the memory, about three
    # significant digits)
    capture_dtype: str = "float32"

    def shared(self, kind: str) -> tuple[str, ...]:
        """The attention kinds whose heads are ``kind``'s heads (itself; an LLM's three views of one attention)."""
        carriers = set(self.same_heads.get(kind, (kind,)))
        return tuple(k for k in self.attention_kinds if k == kind or carriers & set(self.same_heads.get(k, (k,))))

    def view(self, kind: str) -> AttentionKind:
        """What the views call ``kind`` for this model kind: its own words, else ``ATTENTION_KINDS``'s."""
        return self.views.get(kind) or ATTENTION_KINDS[kind]

    def expected_shapes(self, cfg: ModelConfig, src_len: int, tgt_len: int) -> dict[str, tuple[int, ...]]:
        """The shape of each full attention tensor of one translation (what the self-test and tests check)."""
        axes = {"encoder": (src_len, src_len), "decoder": (tgt_len, tgt_len), "cross": (tgt_len, src_len)}
        return {kind: (*self.layout(cfg)[kind], *axes[kind]) for kind in self.attention_kinds}


_KINDS: Registry[ModelKind] = Registry("model kind", "attnviz.engine.kinds", lambda module: module != "registry")
register, unregister, registered = _KINDS.register, _KINDS.unregister, _KINDS.registered


def all_kinds() -> tuple[ModelKind, ...]:
    """Every registered kind, in registration order."""
    return tuple(_KINDS.entries().values())


def kind_names() -> tuple[str, ...]:
    return tuple(_KINDS.entries())


def get_kind(name: str) -> ModelKind:
    """The kind called ``name``; ConfigError naming the known kinds otherwise."""
    kinds = _KINDS.entries()
    try:
        return kinds[name]
    except (KeyError, TypeError):
        raise ConfigError(f"unknown model kind {name!r}; this attnviz knows {', '.join(kinds)}") from None


def kind_of(cfg: ModelConfig) -> ModelKind:
    """The registry entry of ``cfg.kind`` (ConfigError naming the known kinds when it is not registered)."""
    kinds = _KINDS.entries()
    if cfg.kind not in kinds:
        raise ConfigError(f"kind must be one of {kind_names()}, not {cfg.kind!r}")
    return kinds[cfg.kind]


def check(cfg: ModelConfig) -> ModelConfig:
    """``cfg``, once its kind is registered and the kind's own rules hold (raises ``ConfigError`` otherwise)."""
    kind_of(cfg).validate(cfg)
    return cfg


def check_training(model: ModelConfig, train: TrainConfig) -> None:
    """Settings that are valid alone but not together (raises ``ConfigError``)."""
    kind = kind_of(model)
    if train.teacher_forcing < 1.0 and not kind.teacher_forcing:
        able = ", ".join(k.name for k in all_kinds() if k.teacher_forcing)
        raise ConfigError(f"teacher_forcing below 1 needs a model that feeds its own predictions (kind {able}); "
                          f"a {kind.title} always reads the gold prefix")
    if train.keep_metric == "bleu" and not kind.has_source:
        raise ConfigError("keep_metric bleu needs a translation model; a language model keeps val_loss or accuracy")
