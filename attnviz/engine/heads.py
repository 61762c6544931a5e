"""Which attention heads are switched off: parsed from and written as text, checked, and turned into gates.

``engine.search.head_mask`` applies them to a model; this module needs no torch (the config and the CLI's parsing
use it).

A head that is off has its attention weights zeroed, so it adds nothing to its layer's output (Michel et al.,
2019, "Are Sixteen Heads Really Better than One?"). By default the remaining heads are left as they are; with
``rescale`` the layer's remaining heads are multiplied by H / (H - off), as dropout does, so the attention output
keeps its expected size. A softmax row cannot be renormalised once every weight in it is zero, which is why the
alternative acts across heads rather than within one.

Heads are written ``kind:LAYER.HEAD``, 1-based as the views number them, with ``*`` for every head of a layer:
``cross:3.1,cross:3.4,enc:2.*``. Kinds: ``enc``/``encoder``, ``dec``/``decoder``/``self``, ``cross``. Internally a
head is a ``HeadRef`` (kind, layer, head), 0-based.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from attnviz.engine.errors import InputError

KIND_ALIASES = {"enc": "encoder", "encoder": "encoder", "dec": "decoder", "decoder": "decoder", "self": "decoder",
                "cross": "cross"}
SHORT_NAMES = {"encoder": "enc", "decoder": "dec", "cross": "cross"}
_HEAD = re.compile(r"^\s*(\w+)\s*:\s*(\d+)\s*\.\s*(\d+|\*)\s*$", re.ASCII)
Layout = Mapping[str, tuple[int, int]]  # attention kind -> (layers, heads), as a model kind's registry entry says


# What every output that names heads says about its numbers: layers and heads count from 1, as the views and
# --mask-heads do, so a head copied from any table or JSON switches off that head.
NUMBERING = "1-based"


def numbered(row: Mapping, kind_key: str = "kind") -> dict:
    """A row naming a head 0-based (``layer``, ``head``, ``kind``) as outputs write it: 1-based, with the text
    ``--mask-heads`` reads (``"mask": "cross:3.5"``)."""
    layer, head = int(row["layer"]) + 1, int(row["head"]) + 1
    out = dict(row, layer=layer, head=head)
    kind = row.get(kind_key)
    if kind in SHORT_NAMES:
        out["mask"] = f"{SHORT_NAMES[kind]}:{layer}.{head}"
    return out


class HeadRef(NamedTuple):
    kind: str  # "encoder", "decoder" or "cross"
    layer: int  # 0-based
    head: int  # 0-based


def parse_heads(text: str, layout: Layout) -> tuple[HeadRef, ...]:
    """``"cross:3.1,enc:2.*"`` -> sorted, unique ``HeadRef``s, checked against the model's ``layout``."""
    refs: set[HeadRef] = set()
    for item in filter(None, (part.strip() for part in (text or "").split(","))):
        match = _HEAD.match(item)
        if not match or match.group(1).lower() not in KIND_ALIASES:
            raise InputError(f"Cannot read the head {_quote(item)}: write KIND:LAYER.HEAD with KIND one of enc, dec, "
                             "cross and 1-based numbers, or LAYER.* for a whole layer (e.g. cross:3.1,enc:2.*).")
        kind = KIND_ALIASES[match.group(1).lower()]
        layer, head = number(match.group(2)) - 1, match.group(3)
        layers, heads = _kind_shape(kind, layout)
        if not 0 <= layer < layers:
            raise InputError(f"{_quote(item)}: the model's {kind} attention has layers 1-{layers}.")
        if head == "*":
            refs.update(HeadRef(kind, layer, h) for h in range(heads))
            continue
        if not 1 <= number(head) <= heads:
            raise InputError(f"{_quote(item)}: the model's {kind} attention has heads 1-{heads} in each layer.")
        refs.add(HeadRef(kind, layer, number(head) - 1))
    return tuple(sorted(refs))


def number(digits: str) -> int:
    """A layer or head number written in ASCII digits; one too long for any model (thousands of digits, which
    ``int`` refuses) reads as a number past every range, so that its message is the range's."""
    return int(digits) if len(digits) <= 9 else 10**9


def _quote(item: str) -> str:
    """``item`` as a message quotes it, cut short (a head written with thousands of digits stays one short line)."""
    return repr(item if len(item) <= 40 else item[:24] + "..." + item[-8:])


def _kind_shape(kind: str, layout: Layout) -> tuple[int, int]:
    if kind not in layout:
        raise InputError(f"The model has no {kind} attention; it has {', '.join(layout) or 'none'}.")
    return layout[kind]


def format_heads(refs: Iterable[HeadRef], layout: Layout | None = None) -> str:
    """The text ``parse_heads`` reads back; a whole layer is written ``LAYER.*`` when ``layout`` is given."""
    refs = sorted(set(refs))
    parts: list[str] = []
    for kind, layer in dict.fromkeys((r.kind, r.layer) for r in refs):
        heads = [r.head for r in refs if (r.kind, r.layer) == (kind, layer)]
        if layout is not None and kind in layout and len(heads) == layout[kind][1]:
            parts.append(f"{SHORT_NAMES[kind]}:{layer + 1}.*")
        else:
            parts.extend(f"{SHORT_NAMES[kind]}:{layer + 1}.{h + 1}" for h in heads)
    return ",".join(parts)


def check_heads(refs: Iterable[HeadRef], layout: Layout) -> None:
    """Raise ``InputError`` if a head lies outside the model's ``layout``."""
    for ref in refs:
        layers, heads = _kind_shape(ref.kind, layout)
        if not (0 <= ref.layer < layers and 0 <= ref.head < heads):
            raise InputError(f"The model has no {ref.kind} head {ref.layer + 1}.{ref.head + 1}: its {ref.kind} "
                             f"attention has {layers} layers of {heads} heads.")


def gate_values(refs: Iterable[HeadRef], layout: Layout, rescale: bool) -> dict[tuple[str, int], list[float]]:
    """(kind, layer) -> one multiplier per head, for every layer with a head off: 0 for an off head, 1 (or
    H / (H - off) with ``rescale``) for the others."""
    off: dict[tuple[str, int], set[int]] = {}
    for ref in refs:
        off.setdefault((ref.kind, ref.layer), set()).add(ref.head)
    gates = {}
    for (kind, layer), heads_off in off.items():
        heads = layout[kind][1]
        keep = (heads / (heads - len(heads_off))) if rescale and len(heads_off) < heads else 1.0
        gates[(kind, layer)] = [0.0 if h in heads_off else keep for h in range(heads)]
    return gates
