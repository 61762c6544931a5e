"""The sandbox a model's chat template runs in: jinja2's immutable sandbox (no attribute, method or import escapes),
bounded in what it may compute and allocate, since a template is a program from a downloaded file.

The render's step budget (``llm_tokens.render``) counts Python line events, so work done inside one C call is
unseen by it: ``10 ** 10**8``, ``'a' * 10**9``, ``[0] * 10**9``, ``'x'.center(10**10)`` each hold the interpreter
for minutes or take gigabytes in one call. Here every ``*``, ``**`` and ``+`` is checked before it runs
(``call_binop``: numbers of at most ``MAX_INT_BITS`` bits, sequences of at most ``MAX_ITEMS`` items), the filters
that pad or indent take bounded widths, and constants are not folded while compiling (``optimized=False``: jinja2
would otherwise compute ``10**5000`` outside any check). What a template still raises is mapped to one line by
the caller.
"""

from __future__ import annotations

import datetime
import json
import math
from collections.abc import Callable
from typing import Any

from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError

MAX_INT_BITS = 4096  # an integer a template may make: far beyond any index or count a prompt needs
MAX_ITEMS = 1_000_000  # characters of a string, items of a list a template may make in one operation
MAX_WIDTH = 1_000  # what center/indent/tojson may pad to


def _size(value: Any) -> int | None:
    return len(value) if isinstance(value, (str, bytes, list, tuple)) else None


def _bits(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0.0
    return math.log2(abs(value)) if value else 0.0


def _checked_binop(operator: str, left: Any, right: Any) -> None:
    """Refuse (SecurityError) an operation whose result would be too large to make in one call."""
    if operator == "**" and isinstance(right, (int, float)) and not isinstance(right, bool):
        if abs(right) > MAX_INT_BITS or max(_bits(left), 1.0) * abs(right) > MAX_INT_BITS:
            raise SecurityError(f"the power {str(left)[:20]} ** {str(right)[:20]} is too large to compute")
    if operator == "*":
        sizes = (_size(left), _size(right))
        if any(sizes):
            count = right if sizes[0] is not None else left
            if isinstance(count, int) and max(sizes[0] or 0, sizes[1] or 0) * count > MAX_ITEMS:
                raise SecurityError(f"repeating a sequence {count:,} times makes more than {MAX_ITEMS:,} items")
        elif _bits(left) + _bits(right) > MAX_INT_BITS:
            raise SecurityError("the product is too large to compute")
    if operator == "+" and (_size(left) or 0) + (_size(right) or 0) > MAX_ITEMS:
        raise SecurityError(f"joining makes more than {MAX_ITEMS:,} items")


class BoundedSandbox(ImmutableSandboxedEnvironment):
    """jinja2's immutable sandbox, every ``*``, ``**`` and ``+`` checked first (``_checked_binop``)."""

    intercepted_binops = frozenset({"*", "**", "+"})

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        _checked_binop(operator, left, right)
        return super().call_binop(context, operator, left, right)


def _bounded(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def filtered(value: Any, width: Any = 80, *args: Any, **kwargs: Any) -> Any:
        if isinstance(width, int) and abs(width) > MAX_WIDTH:
            raise SecurityError(f"{name}({width:,}) pads wider than {MAX_WIDTH:,}")
        return fn(value, width, *args, **kwargs)

    return filtered


def _tojson(value: Any, indent: Any = None, **_: Any) -> str:
    if isinstance(indent, int) and abs(indent) > MAX_WIDTH:
        raise SecurityError(f"tojson(indent={indent:,}) indents wider than {MAX_WIDTH:,}")
    return json.dumps(value, ensure_ascii=False, indent=indent)


def sandbox(raise_exception: Callable[[Any], None]) -> BoundedSandbox:
    """The environment every chat template compiles in: the loop controls, ``tojson`` as transformers gives it,
    ``raise_exception`` and ``strftime_now`` (the globals Hub templates call)."""
    env = BoundedSandbox(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"],
                         optimized=False)
    for name in ("center", "indent"):
        env.filters[name] = _bounded(name, env.filters[name])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.datetime.now().strftime(str(fmt))
    return env
