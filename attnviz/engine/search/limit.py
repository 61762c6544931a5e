"""A search's step limit (the output length asked, capped by the model's target positions), whether a hypothesis
stopped there instead of at ``<eos>``, and the one sentence that says so: the command line names ``--max-len``, the
GUI its Max length box. Torch-free, for the GUI's document as for the search."""

from __future__ import annotations

from collections.abc import Sequence

from attnviz.engine.text.vocab import EOS


def capped_limit(max_len: int, max_target_len: int) -> int:
    """Output tokens a search may produce: ``max_len``, capped by the model's target position table."""
    return max(1, min(max_len, max_target_len))


def reached_limit(tokens: Sequence[str], limit: int) -> bool:
    """Whether a hypothesis of ``tokens`` (with its ``<eos>`` when it has one) was cut at the step ``limit``."""
    return len(tokens) >= limit and tokens[-1] != EOS


def limit_warning(limit: int, setting: str) -> str:
    """The warning for a translation cut at ``limit`` tokens; ``setting`` is how the user raises it here."""
    return f"the translation reached the limit of {limit} tokens and was cut there (raise {setting} to let it finish)"
