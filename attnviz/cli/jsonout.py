"""JSON as the command line prints it (``--json``): ``json.dumps``, and then the three characters that JSON leaves
unescaped but that line-based readers take for a line break (U+0085 NEXT LINE, U+2028 LINE SEPARATOR, U+2029
PARAGRAPH SEPARATOR: Python's ``str.splitlines`` and JavaScript split on them) written as ``\\u`` escapes, so each
record stays on one line whatever its text holds. They can only occur inside strings, where the escape means the
same character."""

from __future__ import annotations

import json
from typing import Any

LINE_BREAKS = {"\u0085": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_TABLE = str.maketrans(LINE_BREAKS)


def json_text(value: Any, **options: Any) -> str:
    """``json.dumps(value, **options)`` with no character a line reader splits on."""
    return json.dumps(value, **options).translate(_TABLE)
