"""Probe points: the one door into a network's insides, for every capture, edit and attribution.

A network names the places in its forward pass where a value may be read or replaced (``probe_names()``):

- ``embed.src``, ``embed.tgt``: token embeddings after the embedding scale, before positions are added [B, T, D];
- ``enc.{l}.in``, ``dec.{l}.in``: a layer's input, the residual stream entering it [B, T, D];
- ``enc.{l}.attn.*``, ``dec.{l}.self.*``, ``dec.{l}.cross.*``: one attention block's ``q`` [B, H, Tq, dh], ``k`` and
  ``v`` [B, H, Tk, dh] (as computed: a cached decode step computes its new position's only; cross-attention's once
  per sentence, when decoding starts), ``weights`` [B, H, Tq, Tk], ``heads`` (each head's output [B, H, Tq, dh]),
  ``out`` (the heads merged and projected [B, Tq, D]) and ``resid`` (the residual stream after the block, after its
  LayerNorm in a post-norm network);
- ``enc.{l}.ff.out``, ``dec.{l}.ff.out``: the feed-forward sublayer's output; ``enc.{l}.out``, ``dec.{l}.out``: the
  layer's output;
- ``enc.final_norm`` (the memory cross-attention reads), ``dec.final_norm`` (what ``project`` reads), ``logits``.

The LSTM offers fewer (its layers run fused inside ``nn.LSTM``). Layers count from 0 here, as tensors do; the views
number them from 1. While a beam search decodes a sentence's hypotheses side by side, a cross-attention block's
query-side points (``q``, ``weights``, ``heads``) hold the sentence's hypotheses together, [B, H, hyps x Tq, ...].

``capture(model, names)`` records what passes those points inside the block; ``edit(model, {name: fn})`` replaces
each value there with ``fn(value)``. Both are scoped to the calling thread: another thread running the same model
meanwhile sees neither. Blocks nest: edits of one point apply outermost first, captures see the value after every
edit, and leaving a block restores what was in force before. Names may use ``*`` for one dotted part
(``dec.*.cross.weights``); a name or pattern the network does not offer is refused with the names it does.

An unused probe costs nothing measurable: a network asks its board for this thread's plan once per module call,
which is None while no block is open in any thread, and an attention block computes its weights explicitly only
when someone reads or edits them (``wants``); otherwise the fused kernel runs. ``HeadScale`` is the one edit of the
weights that keeps the fused path: multiplying a head's weights by a factor multiplies its output by it.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from torch import Tensor

from attnviz.engine.errors import InputError

Edit = Callable[[Tensor], Tensor]

ATTENTION_POINTS = ("q", "k", "v", "weights", "heads", "out", "resid")
BLOCK_OF_KIND = {"encoder": "enc.{layer}.attn", "decoder": "dec.{layer}.self", "cross": "dec.{layer}.cross"}
SIDE_PREFIX = {"encoder": "enc", "decoder": "dec"}


class ProbeError(InputError):
    """A probe point the network does not offer, or a capture read the wrong way."""


@dataclass(frozen=True)
class BlockNames:
    """The probe names of one attention block, computed once when the network is built."""

    q: str
    k: str
    v: str
    weights: str
    heads: str
    out: str
    resid: str

    @classmethod
    def of(cls, prefix: str) -> BlockNames:
        return cls(*(f"{prefix}.{point}" for point in ATTENTION_POINTS))

    def __iter__(self) -> Iterator[str]:
        return iter((self.q, self.k, self.v, self.weights, self.heads, self.out, self.resid))


@dataclass(frozen=True)
class LayerNames:
    """The probe names of one layer: its input, its feed-forward output and its output."""

    input: str
    ff: str
    out: str

    @classmethod
    def of(cls, prefix: str) -> LayerNames:
        return cls(f"{prefix}.in", f"{prefix}.ff.out", f"{prefix}.out")


def layer_point(side: str, layer: int, point: str) -> str:
    """The probe name of an ``encoder`` or ``decoder`` layer's point (``in``, ``ff.out``, ``out``):
    ``layer_point("encoder", 1, "out") == "enc.1.out"``."""
    return f"{SIDE_PREFIX[side]}.{layer}.{point}"


def attention_point(kind: str, layer: int, point: str) -> str:
    """The probe name of an attention kind's (``encoder``, ``decoder`` self, ``cross``) point in ``layer`` (0-based):
    ``attention_point("cross", 2, "weights") == "dec.2.cross.weights"``."""
    return f"{BLOCK_OF_KIND[kind].format(layer=layer)}.{point}"


@dataclass(frozen=True)
class HeadScale:
    """An edit of an attention block's ``weights`` or ``heads`` that multiplies head h by ``factors[h]`` ([H]): 0 on
    the weights switches a head off and a factor on the heads rescales it (``engine.search.head_mask``); a factor
    that requires a gradient measures a head's importance. On the weights it commutes with the product by the
    values, so the fused attention path applies it to the heads' outputs instead."""

    factors: Tensor

    def __call__(self, value: Tensor) -> Tensor:  # weights [B, H, Tq, Tk] or heads [B, H, Tq, dh]
        return value * self.factors.to(value.dtype)[:, None, None]


class Plan:
    """What one thread's open blocks ask of one network: point name -> edits (outermost first) and captures."""

    def __init__(self, scopes: Sequence[_Scope]):
        self.edits: dict[str, list[Edit]] = {}
        self.captures: dict[str, list[list[Tensor]]] = {}
        for scope in scopes:
            for name, fn in scope.edits.items():
                self.edits.setdefault(name, []).append(fn)
            for name in scope.captures:
                self.captures.setdefault(name, []).append(scope.captures[name])
        self.points = frozenset(self.edits) | frozenset(self.captures)

    def wants(self, name: str) -> bool:
        """Whether a block reads or edits ``name`` (a network computes attention weights only when one does)."""
        return name in self.points

    def only_head_scales(self, name: str) -> Tensor | None:
        """The product of the ``HeadScale`` factors edited at ``name`` when nothing else reads or edits it (so the
        fused attention path may apply them to the heads' outputs); None otherwise."""
        if name in self.captures or not all(isinstance(fn, HeadScale) for fn in self.edits.get(name, ())):
            return None
        return self.head_scales(name)

    def head_scales(self, name: str) -> Tensor | None:
        """The product of the ``HeadScale`` edits in force at ``name`` (None: none), whatever else is there."""
        factors = None
        for fn in self.edits.get(name, ()):
            if isinstance(fn, HeadScale):
                factors = fn.factors if factors is None else factors * fn.factors
        return factors

    def at(self, name: str, value: Tensor) -> Tensor:
        """``value`` after this thread's edits at ``name``, recorded by its captures."""
        if name not in self.points:
            return value
        for fn in self.edits.get(name, ()):
            value = fn(value)
        for sink in self.captures.get(name, ()):
            sink.append(value)
        return value


def tap(plan: Plan | None, name: str, value: Tensor) -> Tensor:
    """A probe point in a network's forward pass: ``value`` as the thread's open blocks leave it."""
    return value if plan is None else plan.at(name, value)


@dataclass
class _Scope:
    edits: dict[str, Edit]
    captures: dict[str, list[Tensor]]


class ProbeBoard:
    """The probe points one network offers and each thread's open blocks on them (a network holds one, shared by
    its modules; ``attach`` gives a module its board and its names' prefix)."""

    def __init__(self, names: Iterable[str]):
        self.names = tuple(names)
        self._offered = frozenset(self.names)
        self._local = threading.local()
        self._open = 0  # blocks open in every thread: while 0 no thread has a plan
        self._count = threading.Lock()

    def __deepcopy__(self, memo: dict) -> ProbeBoard:
        return ProbeBoard(self.names)  # a copied network has its own board, with no block open

    def plan(self) -> Plan | None:
        """This thread's plan, or None while it has no block open (the cost of an unused probe)."""
        if not self._open:
            return None
        return getattr(self._local, "plan", None)

    def resolve(self, patterns: Iterable[str]) -> list[str]:
        """The offered names the patterns name (``*`` matches one dotted part), in the network's order."""
        found: list[str] = []
        for pattern in patterns:
            if not isinstance(pattern, str):
                raise ProbeError(f"A probe point is named by a string, not {pattern!r}.")
            if pattern in self._offered:
                matched = [pattern]
            else:
                regex = re.compile("^" + r"[^.]+".join(map(re.escape, pattern.split("*"))) + "$")
                matched = [name for name in self.names if regex.match(name)] if "*" in pattern else []
            if not matched:
                raise ProbeError(f"This network has no probe point {pattern!r}; it offers {describe(self.names)}.")
            found.extend(name for name in matched if name not in found)
        return found

    @contextmanager
    def opened(self, edits: Mapping[str, Edit], captures: Mapping[str, list[Tensor]]) -> Iterator[None]:
        mine = self._local.__dict__  # the opening thread's: a generator may be closed from another thread
        stack: list[_Scope] = mine.setdefault("stack", [])
        scope = _Scope(dict(edits), dict(captures))
        stack.append(scope)
        mine["plan"] = Plan(stack)
        with self._count:
            self._open += 1
        try:
            yield
        finally:
            with self._count:
                self._open -= 1
            # by identity: two generators of one thread may leave their blocks in another order than they opened them
            stack[:] = [other for other in stack if other is not scope]
            mine["plan"] = Plan(stack) if stack else None


class Captured(Mapping[str, Tensor]):
    """What passed the captured points: ``captured[name]`` is the one value that passed ``name`` (a point passed
    several times, as in step-by-step decoding, is read with ``all(name)``)."""

    def __init__(self, sinks: dict[str, list[Tensor]]):
        self._sinks = sinks

    def all(self, name: str) -> list[Tensor]:
        if name not in self._sinks:
            raise ProbeError(f"{name!r} was not captured; the block captured {describe(list(self._sinks))}.")
        return list(self._sinks[name])

    def __getitem__(self, name: str) -> Tensor:
        values = self.all(name)
        if len(values) != 1:
            raise ProbeError(f"{name!r} was passed {len(values)} times in the block, not once; read all({name!r}).")
        return values[0]

    def __iter__(self) -> Iterator[str]:
        return iter(self._sinks)

    def __len__(self) -> int:
        return len(self._sinks)


def board_of(model: Any) -> ProbeBoard:
    board = getattr(model, "probes", None)
    if not isinstance(board, ProbeBoard):
        raise ProbeError(f"A {type(model).__name__} offers no probe points.")
    return board


def probe_names(model: Any) -> tuple[str, ...]:
    """Every probe point ``model`` offers, in the order of its forward pass."""
    return board_of(model).names


@contextmanager
def capture(model: Any, names: Iterable[str]) -> Iterator[Captured]:
    """Within the block, record what passes the points ``names`` (patterns allowed) in this thread's calls."""
    board = board_of(model)
    sinks: dict[str, list[Tensor]] = {name: [] for name in board.resolve(names)}
    with board.opened({}, sinks):
        yield Captured(sinks)


@contextmanager
def edit(model: Any, edits: Mapping[str, Edit]) -> Iterator[None]:
    """Within the block, the value at each point (a pattern edits every point it names) is ``fn(value)``, in this
    thread's calls only."""
    board = board_of(model)
    resolved: dict[str, Edit] = {}
    for pattern, fn in edits.items():
        if not callable(fn):
            raise ProbeError(f"The edit of {pattern!r} must be a function of the value, not {fn!r}.")
        for name in board.resolve([pattern]):
            resolved[name] = fn
    with board.opened(resolved, {}):
        yield


def head_scales(model: Any, name: str) -> Tensor | None:
    """The per-head factors ([H]) this thread's ``HeadScale`` edits apply at point ``name`` (None: none): what a
    decomposition of a block's output (ALTI+) multiplies each head's terms by."""
    plan = board_of(model).plan()
    return None if plan is None else plan.head_scales(name)


def describe(names: Sequence[str]) -> str:
    """Names shortened for a message: layer numbers folded, ``enc.{0-5}.attn.q``."""
    folded: dict[str, list[int]] = {}
    for name in names:
        parts = name.split(".")
        numbered = [i for i, p in enumerate(parts) if p.isdigit()]
        if numbered:
            i = numbered[0]
            key = ".".join([*parts[:i], "{}", *parts[i + 1:]])
            folded.setdefault(key, []).append(int(parts[i]))
        else:
            folded.setdefault(name, [])
    shown = []
    for key, layers in folded.items():
        if not layers:
            shown.append(key)
        else:
            span = str(layers[0]) if len(layers) == 1 else f"{min(layers)}-{max(layers)}"
            shown.append(key.replace("{}", "{" + span + "}"))
    return ", ".join(shown) if shown else "none"
