"""What every attribution method returns and how methods are listed: ``Attribution``, ``AttributionProgress``,
``AttributionSettings`` and the ``AttributionMethod`` registry the command line and the GUI read.

An attribution explains the T output tokens of one teacher-forced translation: for each output token t, a value per
source token (``source`` [L', T, S]) and per decoder input (``prefix`` [L', T, T], the ``<sos>`` then the outputs
before the last; a decoder input after step t cannot matter to step t and holds 0). L' is 1 for methods without
layers (gradients) and the number of layers for layered ones (ALTI+, value zeroing, after each layer). A method is
a generator of ``AttributionProgress`` events ending in one ``Attribution``, with a stop check between yields; a
stopped run yields nothing more. Methods register themselves from the modules of this package (as model kinds do),
so adding one is adding a module. This module is torch-free: listing the methods needs no network.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np

from attnviz.engine.attribution.corruption import parse_corruption
from attnviz.engine.errors import ConfigError, InputError, check_on_cpu
from attnviz.engine.plugins import Registry

if TYPE_CHECKING:  # the types only: nothing here imports torch
    from attnviz.engine.translator import Translator

AGGREGATIONS = ("l2", "sum")  # over the embedding dimension: the L2 norm (>= 0) or the signed sum
BASELINES = ("zero", "pad", "unk")  # integrated gradients' reference input: zero vectors, or every token's
# embedding replaced by that of <pad> / <unk>
TARGETS = ("log-probability", "probability")  # what is attributed: log p(chosen) (default) or p(chosen)
MAX_STEPS = 1024
PROMPT_ROLES = ("template", "instruction", "source")  # an LLM prompt token's role (``hub.llm_prompt``)
SHARES = ("source span", "instruction and template", "output prefix")  # the last axis of ``Attribution.shares``


@dataclass(frozen=True)
class AttributionSettings:
    """Every setting a method may read, validated on creation; a method reads only those it names in its
    registry entry's ``settings`` (the others keep their defaults and are refused when changed)."""

    aggregate: str | None = None  # "l2" or "sum" over the embedding; None: the method's own default
    steps: int = 32  # integrated gradients: points of the path integral (Gauss-Legendre nodes)
    baseline: str = "zero"  # integrated gradients: the reference input (``BASELINES``)
    target: str = "log-probability"  # the attributed quantity (``TARGETS``); with a foil, its difference
    foil: str | None = None  # contrastive attribution (Yin & Neubig 2022): one target-vocabulary token
    corrupt: str | None = None  # activation patching: the corrupted source, a sentence of as many tokens or
    # WHICH=WORD (``corruption``); None: every source token <unk>

    def __post_init__(self) -> None:
        if self.aggregate is not None and self.aggregate not in AGGREGATIONS:
            raise ConfigError(f"aggregate must be one of {', '.join(AGGREGATIONS)}, not {self.aggregate!r}")
        if isinstance(self.steps, bool) or not isinstance(self.steps, int) or not 1 <= self.steps <= MAX_STEPS:
            raise ConfigError(f"steps must be a whole number from 1 to {MAX_STEPS}, not {self.steps!r}")
        if self.baseline not in BASELINES:
            raise ConfigError(f"baseline must be one of {', '.join(BASELINES)}, not {self.baseline!r}")
        if self.target not in TARGETS:
            raise ConfigError(f"target must be one of {', '.join(TARGETS)}, not {self.target!r}")
        if self.foil is not None and (not isinstance(self.foil, str) or not self.foil.strip()):
            raise ConfigError("foil must be one target token (text), or None for no contrast")
        parse_corruption(self.corrupt)

    def changed(self) -> tuple[str, ...]:
        """The names of the settings that differ from their defaults."""
        default = AttributionSettings()
        return tuple(f.name for f in fields(self) if getattr(self, f.name) != getattr(default, f.name))


@dataclass(frozen=True)
class AttributionProgress:
    done: int  # units of work finished
    total: int
    phase: str  # what is being computed ("gradients", "value zeroing", ...)
    unit: str = "output tokens"


def _labels(name: str, tokens: Sequence[str]) -> tuple[str, ...]:
    if isinstance(tokens, str) or not all(isinstance(t, str) for t in tokens):
        raise ValueError(f"{name} must be a sequence of token strings")
    return tuple(tokens)


def _check_roles(roles: Sequence[str], s: int) -> None:
    if roles and len(roles) != s:
        raise ValueError(f"src_roles name {len(roles)} tokens, but the source has {s}")
    unknown = sorted({role for role in roles if role not in PROMPT_ROLES})
    if unknown:
        raise ValueError(f"src_roles holds {', '.join(map(repr, unknown))}; a role is one of "
                         f"{', '.join(PROMPT_ROLES)}")


@dataclass(frozen=True)
class Attribution:
    """One method's attribution of every output token of one translation (CPU numpy, safe across threads).

    ``source`` [L', T, S] and ``prefix`` [L', T, T] (rows: output tokens; columns: source tokens / decoder inputs);
    ``settings`` reproduce it (the method's own settings and what its values mean, all JSON); ``scores`` [T] is the
    attributed quantity per output token when the method has one (e.g. log p(chosen) - log p(foil)); ``extras`` are
    a method's further figures over the output tokens (integrated gradients' completeness gap); ``notes`` say what
    a reader must know (the completeness gap, a foil equal to the chosen token...)."""

    method: str  # the registry name
    settings: Mapping[str, Any]
    src_tokens: tuple[str, ...]  # S, as the model reads them (empty for a language model)
    tokens: tuple[str, ...]  # T output tokens
    source: np.ndarray  # [L', T, S]
    prefix: np.ndarray  # [L', T, T]
    layered: bool = False
    notes: tuple[str, ...] = ()
    scores: np.ndarray | None = None  # [T]
    extras: Mapping[str, np.ndarray] = field(default_factory=dict)  # per output token [T, ...]: a method's figures
    src_roles: tuple[str, ...] = ()  # an LLM prompt's role per source column (``PROMPT_ROLES``); () all "source"

    def __post_init__(self) -> None:
        s, t = len(_labels("src_tokens", self.src_tokens)), len(_labels("tokens", self.tokens))
        _check_roles(self.src_roles, s)
        for name, array, cols in (("source", self.source, s), ("prefix", self.prefix, t)):
            if not isinstance(array, np.ndarray) or array.ndim != 3 or array.shape[1:] != (t, cols):
                shape = getattr(array, "shape", type(array).__name__)
                raise ValueError(f"{name} has shape {shape}, expected [L', {t}, {cols}] for {t} output and {s} "
                                 "source tokens")
        if self.source.shape[0] != self.prefix.shape[0] or self.source.shape[0] < 1:
            raise ValueError(f"source and prefix must have the same number of layers (>= 1), not "
                             f"{self.source.shape[0]} and {self.prefix.shape[0]}")
        if not self.layered and self.source.shape[0] != 1:
            raise ValueError(f"an attribution without layers has L' = 1, not {self.source.shape[0]}")
        if self.scores is not None and self.scores.shape != (t,):
            raise ValueError(f"scores has shape {self.scores.shape}, expected [{t}]")
        for name, array in self.extras.items():
            if not isinstance(array, np.ndarray) or array.ndim < 1 or array.shape[0] != t:
                raise ValueError(f"extras[{name!r}] must be an array over the {t} output tokens")

    @property
    def decoder_inputs(self) -> tuple[str, ...]:
        """Column labels of ``prefix``: ``<sos>`` then every output token but the last."""
        return ("<sos>",) + self.tokens[:-1]

    @property
    def layers(self) -> int:
        return self.source.shape[0]

    def source_share(self) -> np.ndarray:
        """[L', T]: the share of each output token's attribution that comes from the source, sum |source| /
        (sum |source| + sum |prefix|) (absolute values, since gradient attributions may be negative; ALTI+'s are
        not); 0 where both are 0 (and for a language model, which has no source)."""
        src = np.abs(self.source).sum(-1)
        total = src + np.abs(self.prefix).sum(-1)
        return np.divide(src, total, out=np.zeros_like(total, dtype=np.float64), where=total > 0)

    @property
    def roles(self) -> tuple[str, ...]:
        """Each source column's role: ``src_roles``, or "source" everywhere (an encoder-decoder's source)."""
        return self.src_roles or ("source",) * len(self.src_tokens)

    @property
    def span(self) -> tuple[int, int]:
        """[first, last + 1) of the sentence's own columns (the whole source when no roles say otherwise)."""
        inside = [i for i, role in enumerate(self.roles) if role == "source"]
        return (inside[0], inside[-1] + 1) if inside else (0, len(self.src_tokens))

    def shares(self) -> np.ndarray:
        """[L', T, 3]: each output token's attribution split into the source SPAN (the sentence's own tokens), the
        rest of the prompt (instruction and chat template) and the output PREFIX (the decoder inputs), each part's
        sum of |value| over the whole's (absolute values: a signed gradient's negative evidence counts by its size,
        so every share is >= 0 and the three sum to 1); all 0 where the attribution is 0 everywhere. An
        encoder-decoder's source is all span, so its shares are (source_share, 0, 1 - source_share)."""
        magnitude = np.abs(self.source)
        in_span = np.array([role == "source" for role in self.roles], dtype=bool)
        parts = np.stack([magnitude[..., in_span].sum(-1), magnitude[..., ~in_span].sum(-1),
                          np.abs(self.prefix).sum(-1)], axis=-1).astype(np.float64)
        total = parts.sum(-1, keepdims=True)
        return np.divide(parts, total, out=np.zeros_like(parts), where=total > 0)

    def metadata(self) -> dict[str, Any]:
        """What a JSON sidecar or ``--json`` says about it beside the arrays."""
        return {"method": self.method, "settings": dict(self.settings), "layered": self.layered,
                "layers": self.layers, "src_tokens": list(self.src_tokens), "src_roles": list(self.roles),
                "span": list(self.span), "shares": list(SHARES), "tokens": list(self.tokens),
                "decoder_inputs": list(self.decoder_inputs), "notes": list(self.notes)}

    def arrays(self) -> dict[str, np.ndarray]:
        """The arrays of an NPZ export (no pickled objects): maps, the share, labels and the scores if any."""
        out = {"source": self.source, "prefix": self.prefix, "source_share": self.source_share(),
               "shares": self.shares(), "src_tokens": np.array(self.src_tokens, dtype=str),
               "src_roles": np.array(self.roles, dtype=str), "span": np.array(self.span, dtype=np.int64),
               "tokens": np.array(self.tokens, dtype=str),
               "decoder_inputs": np.array(self.decoder_inputs, dtype=str)}
        if self.scores is not None:
            out["scores"] = self.scores
        return out | {name: array for name, array in self.extras.items() if name not in out}


AttributionEvent: TypeAlias = AttributionProgress | Attribution
Compute: TypeAlias = Callable[["Translator", tuple[str, ...], tuple[str, ...], AttributionSettings,
                               "threading.Event | None"], Iterator[AttributionEvent]]
"""compute(translator, src_tokens, tokens, settings, stop): the method's generator for one teacher-forced
translation (``src_tokens`` with the specials the kind reads; ``tokens`` the T outputs)."""


def _always(translator: Translator) -> str | None:
    return None


@dataclass(frozen=True)
class AttributionMethod:
    """A registered method: its names, what it is, the models it is defined for and its generator."""

    name: str  # registry and command-line name ("gradient-x-input")
    label: str  # how a menu names it ("Gradient x input")
    description: str  # one sentence: what its values mean
    layered: bool  # its attributions have one map per layer
    compute: Compute
    settings: tuple[str, ...] = ()  # the ``AttributionSettings`` fields it reads
    # why it is not defined for a translator (asked of its network, ``offers``, and of what it reads); None: it is
    not_defined: Callable[[Translator], str | None] = _always
    default_aggregate: str | None = None  # the aggregation when ``settings.aggregate`` is None
    reads_roles: bool = False  # its compute takes ``roles=`` (an LLM prompt's) as a keyword

    def why_not(self, translator: Translator) -> str | None:
        """A sentence saying why this method is not defined for ``translator``'s model; None where it is."""
        return self.not_defined(translator)

    def defined_for(self, translator: Translator) -> bool:
        return self.not_defined(translator) is None


_METHODS: Registry[AttributionMethod] = Registry("attribution method", "attnviz.engine.attribution",
                                                 lambda module: module != "base")
register, unregister, registered = _METHODS.register, _METHODS.unregister, _METHODS.registered


def all_methods() -> tuple[AttributionMethod, ...]:
    """Every registered method, in registration order."""
    return tuple(_METHODS.entries().values())


def method_names() -> tuple[str, ...]:
    return tuple(_METHODS.entries())


def get_method(name: str) -> AttributionMethod:
    """The method called ``name``; InputError naming the known methods otherwise."""
    methods = _METHODS.entries()
    if not isinstance(name, str) or name not in methods:
        raise InputError(f"unknown attribution method {name!r}; choose one of {', '.join(methods)}")
    return methods[name]


def check_settings(method: AttributionMethod, settings: AttributionSettings) -> None:
    """Refuse settings ``method`` does not read, so that nothing given is silently ignored."""
    unused = [name for name in settings.changed() if name not in method.settings]
    if unused:
        reads = f"reads only {', '.join(method.settings)}" if method.settings else "has no settings"
        raise InputError(f"{method.label} does not use {', '.join(unused)}: it {reads}")


def attribution_steps(translator: Translator, method: str, src_tokens: Sequence[str], tokens: Sequence[str],
                      settings: AttributionSettings | None = None, stop: threading.Event | None = None,
                      roles: Sequence[str] = ()) -> Iterator[AttributionEvent]:
    """The one entry the CLI, the GUI and tests call: ``method`` (a registry name) on one teacher-forced
    translation, refused with one clear message when the method does not apply to the model's kind, reads none of
    the settings given, or the tokens do not fit the model. ``roles`` (an LLM prompt's, ``Translation.roles``) are
    set on the result here, for every method, so that its ``shares`` split the prompt."""
    entry = get_method(method)
    check_on_cpu(translator, entry.label)
    why = entry.why_not(translator)
    if why is not None:
        raise InputError(f"{entry.label} is not defined for a {translator.kind.title}: {why}")
    settings = settings or AttributionSettings()
    check_settings(entry, settings)
    src, out = _labels("src_tokens", src_tokens), _labels("tokens", tokens)
    if not out:
        raise InputError("Nothing to attribute: the translation has no output tokens.")
    if translator.has_source and not src:
        raise InputError("Nothing to attribute: the source has no tokens.")
    if not translator.has_source and src:
        raise InputError("A language model reads no source; give its text as the output tokens.")
    if roles and len(roles) != len(src):
        raise InputError(f"The prompt's roles name {len(roles)} tokens, but the source has {len(src)}: give the "
                         "roles of the translation attributed (Translation.roles).")
    given = {"roles": tuple(roles)} if entry.reads_roles else {}
    for event in entry.compute(translator, src, out, settings, stop, **given):
        yield dataclasses.replace(event, src_roles=tuple(roles)) if roles and isinstance(event, Attribution) else event


@dataclass(frozen=True)
class MethodList:
    """The methods defined for one kind and those that are not, with why (what a menu shows greyed out)."""

    defined: tuple[AttributionMethod, ...]
    undefined: tuple[tuple[AttributionMethod, str], ...] = field(default=())


def methods_for(translator: Translator) -> MethodList:
    """The registered methods defined for ``translator``'s model, and the others with why not."""
    defined, undefined = [], []
    for method in all_methods():
        why = method.why_not(translator)
        if why is None:
            defined.append(method)
        else:
            undefined.append((method, why))
    return MethodList(tuple(defined), tuple(undefined))
