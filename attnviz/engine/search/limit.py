"""A search's step limit (the output length asked, capped by the model's target positions), whether a hypothesis
stopped there instead of at ``<eos>``, and the one sentence that says so: the command line names ``--max-len``, the
GUI its Max length box; and how a batched search reports its steps on the way (a command line's progress line).
Torch-free, for the GUI's document as for the search and the plain runtime."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from attnviz.engine.text.vocab import EOS

StepCallback = Callable[[int, int], None]  # a batched search's (steps done, its step limit), after each step
BatchProgress = Callable[[int, int, int, int], None]  # (sentences done, of how many, the batch's step, its limit)


def capped_limit(max_len: int, max_target_len: int) -> int:
    """Output tokens a search may produce: ``max_len``, capped by the model's target position table."""
    return max(1, min(max_len, max_target_len))


def reached_limit(tokens: Sequence[str], limit: int, forced_end: bool = False) -> bool:
    """Whether a hypothesis of ``tokens`` (with its ``<eos>`` when it has one) stopped at the step ``limit`` rather
    than by choosing ``<eos>``. With ``forced_end`` (a model's settings force the end token at the last step, as
    imported folders' ``forced_eos_token_id`` does) an ``<eos>`` at the limit was put there, not chosen."""
    return len(tokens) >= limit and (tokens[-1] != EOS or forced_end)


def limit_warning(limit: int, setting: str, forced_end: bool = False) -> str:
    """The warning for a translation stopped at ``limit`` tokens; ``setting`` is how the user raises it here."""
    if forced_end:
        return (f"the translation reached the limit of {limit} tokens, where the model's settings force the end "
                f"token, and may be cut there (raise {setting} to let it finish)")
    return f"the translation reached the limit of {limit} tokens and was cut there (raise {setting} to let it finish)"
