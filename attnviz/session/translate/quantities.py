"""What the Translate tab's attention panel can show for a step besides the raw weights, Qt-free: the list of
quantities a model offers (``quantities``: every per-sentence quantity, so that one selector reaches them all), their
settings menus and the map's title naming a quantity with its settings (``quantity_title``), the worker job that
computes one on a finished translation (``QuantityJob``: teacher-forced on the decoded output, every step at once)
and its cache. ``quantity_source.QuantitySource`` shows a result in the attention panel.

Attention, norm-weighted attention and rollout keep the attention kinds ([L, H, Tq, Tk] each; rollout averages the
heads, so it has one "head"). An attribution method of the engine's registry is one map per output token over the
source tokens then the target prefix (``source`` [L', T, S] beside ``prefix`` [L', T, T']), shown as the kind
``attribution``, with one layer when the method is not layered. The logit lens is one map, the kind ``lens``: per
output token, the probability each decoder layer gives the token chosen ([1, 1, T, L]).
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from attnviz.engine.analysis.names import VIEWS
from attnviz.engine.events import AttentionKind, Translation
from attnviz.engine.text.tokenize import visible_token

ATTENTION = "attention"
ATTRIBUTION = AttentionKind("attribution", "Source | target prefix", "output token (attributed)",
                            "source token | target prefix (\u2192)")
PREFIX_ONLY = AttentionKind("attribution", "Earlier outputs", "output token (attributed)", "earlier output (\u2192)")
LENS = AttentionKind("lens", "p(chosen token) per decoder layer", "output token", "decoder layer (read as the last)")
LENS_KEY = "logit-lens"
PREFIX_MARK = "\u2192"  # "→" before a target-prefix column's label: the decoder input, not a source token
CACHED = 24  # computed quantities kept (per sentence, method and settings)


@dataclass(frozen=True)
class Quantity:
    """One choice of the Quantity selector."""

    key: str  # "attention", a contribution view ("norm", "rollout-residual") or a registered method's name
    label: str
    description: str  # the tooltip: what it is and how it is computed
    layered: bool = True
    why_not: str = ""  # why this model cannot give it ("" when it can)
    settings: Mapping[str, Any] = field(default_factory=dict)  # ``AttributionSettings`` fields changed (a foil)
    method: str | None = None  # the attribution registry's name; None for attention and the contribution views
    reads: tuple[str, ...] = ()  # the settings the method reads

    def with_settings(self, **changed: Any) -> Quantity:
        """The same method with ``changed`` settings (None removes one)."""
        settings = {k: v for k, v in {**self.settings, **changed}.items() if v is not None}
        return dataclasses.replace(self, settings=settings)

    @property
    def computed(self) -> bool:
        """Whether it needs a job (everything but the attention weights the decode already holds)."""
        return self.key != ATTENTION


def contribution_quantities(translator) -> list[Quantity]:
    """Attention and the two contribution views of ``engine.analysis.contributions``, for ``translator``."""
    kinds = translator.kind.attention_kinds if translator is not None else ()
    norm_why = "" if translator is None else _norm_why(translator)
    roll_why = "" if "encoder" in kinds else \
        "rollout multiplies encoder self-attention through the layers; this model has none"
    return [Quantity(ATTENTION, "Attention", "The attention weights of the decode (rows sum to 1)"),
            Quantity("norm", "Norm-weighted", VIEWS["norm"] + " (Kobayashi et al. 2020)", why_not=norm_why),
            Quantity("rollout-residual", "Rollout", VIEWS["rollout-residual"] + " (Abnar & Zuidema 2020)",
                     why_not=roll_why),
            Quantity("rollout", "Rollout (no residual)", VIEWS["rollout"] + " (Abnar & Zuidema 2020)",
                     why_not=roll_why)]


def _norm_why(translator) -> str:
    from attnviz.engine.analysis.contributions import norm_weighted_why  # torch is loaded with the model

    return norm_weighted_why(translator) or ""


def lens_quantity(translator) -> Quantity:
    """The logit lens as a map: per output token (rows) and decoder layer (columns), the probability the layer's
    output, read through the final norm and the output projection, gives the token chosen (nostalgebraist 2020)."""
    from attnviz.engine.attribution.logit_lens import lens_not_defined  # torch is loaded with the model

    why = lens_not_defined(translator) or ""
    return Quantity(LENS_KEY, "Logit lens", "Each decoder layer read as if it were the last: the probability it "
                    "gives the token chosen (nostalgebraist 2020); where the row turns bright, the word is decided. "
                    "The Logit lens page lists each layer's top tokens.", layered=False, why_not=why)


def quantities(translator) -> list[Quantity]:
    """Every choice for ``translator``: attention, the contribution views, then every registered attribution method
    (greyed with the reason where it is not defined for the model's kind), so methods added later appear here."""
    from attnviz.engine.attribution.base import all_methods  # the registry imports its methods' modules

    found = contribution_quantities(translator)
    if translator is None:
        return found
    found.append(lens_quantity(translator))
    for m in all_methods():
        why = m.why_not(translator) or ""
        found.append(Quantity(m.name, m.label, m.description, m.layered, why.rstrip("."), method=m.name,
                              reads=tuple(m.settings)))
    return found


def setting_choices(quantity: Quantity, foils: Sequence[str] = ()) -> list[tuple[str, str, tuple[Any, ...], Any]]:
    """The settings menu of ``quantity``: (name, title, values, value now) of each ``AttributionSettings`` field it
    reads that has a few values to choose from; a method that takes a foil offers none (not contrastive), the
    ``foils`` (the step's other candidates) and the foil it has now."""
    from attnviz.engine.attribution.base import AGGREGATIONS, BASELINES, TARGETS, AttributionSettings

    default = AttributionSettings()
    foil = quantity.settings.get("foil")
    offered = {"foil": ("Contrast with (foil)", (None, *dict.fromkeys([*([foil] if foil else []), *foils]))),
               "aggregate": ("Aggregation over the embedding", (None, *AGGREGATIONS)),
               "target": ("Attributed quantity", TARGETS), "steps": ("Integration steps", (16, 32, 64, 128)),
               "baseline": ("Baseline", BASELINES)}
    return [(name, title, values, quantity.settings.get(name, getattr(default, name)))
            for name, (title, values) in offered.items() if name in quantity.reads]


TYPED = ("corrupt",)  # settings typed as text (not offered in a menu), remembered as typed


def value_text(name: str, value: Any) -> str:
    """How the settings menu words a setting's value."""
    if name == "foil":
        return "None (not contrastive)" if value is None else repr(visible_token(str(value)))
    return "the method's default" if value is None else str(value)


def quantity_title(quantity: Quantity) -> str:
    """The map's title for ``quantity``: its name (contrastive against its foil when it has one) and the settings
    that change what it measures: integration steps and baseline, a target or aggregation other than the default,
    the corrupted source."""
    from attnviz.engine.attribution.base import AttributionSettings
    from attnviz.engine.attribution.corruption import DEFAULT

    default, asked = AttributionSettings(), quantity.settings
    foil, reads = asked.get("foil"), quantity.reads
    label = quantity.label if quantity.label[1:2].isupper() else quantity.label[:1].lower() + quantity.label[1:]
    parts = [f"Contrastive {label} vs {visible_token(str(foil))!r} (foil)" if foil else quantity.label]
    if "steps" in reads:
        parts.append(f"{asked.get('steps', default.steps)} steps")
    if "baseline" in reads:
        parts.append(f"baseline {asked.get('baseline', default.baseline)}")
    parts += [str(asked[name]) for name in ("target", "aggregate") if name in reads and asked.get(name) is not None
              and asked[name] != getattr(default, name)]
    if "corrupt" in reads:
        parts.append(f"corrupted: {asked.get('corrupt') or DEFAULT}")
    return " \u00b7 ".join(parts)


def refusal(settings: Mapping[str, Any]) -> str | None:
    """Why the engine refuses these settings (``AttributionSettings``' own checks, the ones the CLI meets), or None."""
    from attnviz.engine.attribution.base import AttributionSettings
    from attnviz.engine.errors import ConfigError

    try:
        AttributionSettings(**settings)
    except ConfigError as error:
        return str(error)
    return None


def kept_settings(quantity: Quantity, asked: Mapping[str, Any]) -> dict[str, Any]:
    """Of the settings ``asked`` for ``quantity`` (read back from the last session), those it still takes: a value
    its menus offer, or a typed text the engine accepts."""
    offered = {name: values for name, _, values, _ in setting_choices(quantity)}
    return {k: v for k, v in asked.items()
            if (k in offered and v in offered[k])
            or (k in TYPED and k in quantity.reads and isinstance(v, str) and refusal({k: v}) is None)}


@dataclass(frozen=True)
class QuantityProgress:
    """How far a quantity's job is: ``done`` of ``total`` units (output tokens, integration steps...)."""

    done: int
    total: int
    text: str = ""


@dataclass(frozen=True)
class QuantityResult:
    """A quantity computed on a whole translation: kind -> [L, H, T or S, Tk]; ``columns`` the attribution's column
    labels (source tokens then the target prefix) when it is one; its settings and notes, for captions and
    exports."""

    quantity: Quantity
    maps: dict[str, np.ndarray]
    columns: tuple[str, ...] = ()
    sources: int = 0  # how many of the columns are source tokens
    settings: Mapping[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    share: np.ndarray | None = None  # [T] an attribution's source share per output token (last layer)
    parts: np.ndarray | None = None  # [T, 3] an LLM prompt's: source span, instruction and template, output prefix


def contribution_result(quantity: Quantity, views: dict[str, dict[str, np.ndarray]]) -> QuantityResult:
    """The views of ``contributions.sentence_views`` as the result of ``quantity`` (rollout: one map per layer)."""
    maps = views.get(quantity.key, {})
    if quantity.key.startswith("rollout"):
        maps = {k: m[:, :1] for k, m in maps.items()}  # [L, H, Tq, Tk] -> [L, 1, Tq, Tk]: its heads repeat
    return QuantityResult(quantity, maps, settings={"view": quantity.key})


@dataclass(frozen=True)
class QuantityJob:
    """Worker job: ``quantity`` of the finished ``translation``, its progress then its ``QuantityResult``."""

    translator: Any
    translation: Translation
    quantity: Quantity

    def __call__(self, stop: threading.Event) -> Iterator[QuantityProgress | QuantityResult]:
        from attnviz.engine.analysis.contributions import sentence_views

        if self.quantity.method is not None:
            yield from self._attribution(stop)
            return
        if self.quantity.key == LENS_KEY:
            yield from self._lens(stop)
            return
        yield QuantityProgress(0, 1, f"{self.quantity.label}: one teacher-forced pass")
        views = sentence_views(self.translator, self.translation.src_tokens, self.translation.decoder_inputs)
        yield contribution_result(self.quantity, views)


    def _lens(self, stop: threading.Event) -> Iterator[QuantityProgress | QuantityResult]:
        from attnviz.engine.attribution.logit_lens import LogitLens, logit_lens_steps

        t = self.translation
        for event in logit_lens_steps(self.translator, t.src_tokens, t.tokens, stop=stop):
            if isinstance(event, LogitLens):
                yield lens_result(self.quantity, event)
            else:
                yield QuantityProgress(event.done, event.total, progress_text(self.quantity.label, event.phase))

    def _attribution(self, stop: threading.Event) -> Iterator[QuantityProgress | QuantityResult]:
        from attnviz.engine.attribution.base import Attribution, AttributionSettings, attribution_steps

        q, t = self.quantity, self.translation
        yield QuantityProgress(0, len(t.tokens), f"{q.label}...")
        settings = AttributionSettings(**q.settings)
        for event in attribution_steps(self.translator, q.method or q.key, t.src_tokens, t.tokens, settings, stop,
                                       roles=t.roles):
            if isinstance(event, Attribution):
                yield attribution_result(q, event)
            else:
                yield QuantityProgress(event.done, event.total, progress_text(q.label, event.phase))


def progress_text(label: str, phase: str) -> str:
    """``label: phase``, or the label alone where the phase only repeats it ("Integrated gradients", not
    "Integrated gradients: integrated gradients")."""
    return label if phase.casefold() in label.casefold() else f"{label}: {phase}"


def attribution_result(quantity: Quantity, attribution) -> QuantityResult:
    """An ``Attribution`` as the panel shows it: the kind ``attribution``, [L', 1, T, S + T] (source columns, then
    the decoder inputs), with its settings, notes and source share."""
    a = attribution
    maps = np.concatenate([a.source, a.prefix], axis=-1)[:, None]  # [L', T, S] + [L', T, T] -> [L', 1, T, S + T]
    settings = {k: v for k, v in a.settings.items()}
    return QuantityResult(quantity, {ATTRIBUTION.key: maps}, tuple(a.src_tokens) + a.decoder_inputs,
                          len(a.src_tokens), settings, tuple(a.notes),
                          a.shares()[-1, :, 0] if a.src_tokens else None,  # the source SPAN's; no source, none
                          a.shares()[-1] if a.src_roles else None)


def lens_result(quantity: Quantity, lens) -> QuantityResult:
    """A ``LogitLens`` as a map of the kind ``lens``: [1, 1, T, L], p(chosen) per output token and decoder layer."""
    maps = np.asarray(lens.chosen_prob, dtype=np.float32).T[None, None]  # [L, T] -> [1, 1, T, L]
    columns = tuple(f"L{layer + 1}" for layer in range(lens.layers))  # as the head grid names them
    return QuantityResult(quantity, {LENS.key: maps}, columns, 0, {"readout": lens.readout},
                          (f"Each layer's output is read through {lens.readout}.",))


def export_fields(result: QuantityResult, sinks_hidden: bool) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """What an export adds for a quantity: its arrays (``<key>_<kind>`` maps [L, H, R, C], the source share [T]
    and the attribution's column labels) and the sidecar's ``quantity`` entry (method, settings, notes, layout)."""
    q, prefix = result.quantity, result.quantity.key.replace("-", "_")
    arrays = {f"{prefix}_{kind}": m.astype(np.float32) for kind, m in result.maps.items()}
    if result.share is not None:
        arrays[f"{prefix}_source_share"] = np.asarray(result.share, dtype=np.float32)
    if result.parts is not None:  # [T, 3]: source span, instruction and template, output prefix
        arrays[f"{prefix}_shares"] = np.asarray(result.parts, dtype=np.float32)
    if result.columns:
        arrays[f"{prefix}_columns"] = np.array(result.columns, dtype=str)
    layout = ("[layers, 1, output tokens, source tokens then decoder inputs]; the first `sources` columns are the "
              "source" if ATTRIBUTION.key in result.maps else "[1, 1, output tokens, decoder layers]: p(chosen) as "
              "each layer reads it" if LENS.key in result.maps else "[layers, heads, rows, columns] as the attention "
              "kinds")
    meta = {"key": q.key, "label": q.label, "method": q.method or q.key, "description": q.description,
            "settings": {k: v for k, v in result.settings.items()}, "notes": list(result.notes),
            "arrays": sorted(arrays), "layout": layout, "sources": result.sources,
            "computed_on": "the finished translation, teacher-forced on the decoded output",
            "sinks_hidden_in_the_view": sinks_hidden}
    return arrays, {"quantity": meta}


def cache_key(translator, translation: Translation, quantity: Quantity) -> Hashable:
    """One computed quantity: the model, the sentence and its output tokens, the method and its settings."""
    return (id(translator), translation.src_tokens, translation.tokens, quantity.key,
            tuple(sorted((k, repr(v)) for k, v in quantity.settings.items())))


class QuantityCache:
    """The last ``CACHED`` results, by ``cache_key``."""

    def __init__(self) -> None:
        self._kept: OrderedDict[Hashable, QuantityResult] = OrderedDict()

    def get(self, key: Hashable) -> QuantityResult | None:
        if key in self._kept:
            self._kept.move_to_end(key)
        return self._kept.get(key)

    def put(self, key: Hashable, result: QuantityResult) -> None:
        self._kept[key] = result
        while len(self._kept) > CACHED:
            self._kept.popitem(last=False)

    def clear(self) -> None:
        self._kept.clear()
