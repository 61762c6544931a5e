"""What the attention views say: the head selector's items, and the caption under a map (its title, what its rows
and columns are, what the quantity is, what each kind of marked cell means: future positions, a sliding window's
outside, heads switched off)."""

from __future__ import annotations

from dataclasses import dataclass

MEAN = "Mean of heads"


def head_choices(heads: int, wanted: int) -> tuple[list[str], int]:
    """A head selector's items (the mean of heads, then each head) and index: ``wanted``, except that a one-head
    model shows its head, not a "mean" of one."""
    return [MEAN] + [f"Head {h + 1}" for h in range(heads)], 1 if heads == 1 else wanted


@dataclass(frozen=True)
class Marks:
    """Which marked cells the maps shown hold."""

    own_scale: bool = False  # values leave 0..1: the map is on its own colour scale
    future: bool = False  # hatched: positions the decoder may not see
    window_layer: int | None = None  # the large map's layer (0-based) when cells lie outside its sliding window
    windows_in_grid: bool = False  # the small maps hold cells outside their layer's window
    heads_off: bool = False  # crossed-out heads in the grid


def caption_text(title: str, query_axis: str, key_axis: str, about: str, marks: Marks) -> str:
    """The caption of a map titled ``title`` whose rows are ``query_axis`` and columns ``key_axis``."""
    about += " Values fall outside 0..1: the colour scale is the map's own." if marks.own_scale else ""
    marked = " Hatched grey cells are future positions the decoder may not see (masked, not zero)." \
        if marks.future else ""
    marked += (f" Cells hatched the other way lie outside layer {marks.window_layer + 1}'s sliding window (zero by "
               "construction)." if marks.window_layer is not None else "")
    marked += " Striped grey cells in the small maps lie outside their layer's sliding window." \
        if marks.windows_in_grid else ""
    marked += " Crossed-out heads are switched off: their maps are all zero." if marks.heads_off else ""
    return (f"{title}. Rows: {query_axis}; columns: {key_axis}; {about}{marked} Hover a cell for its exact weight; "
            "click a small map to open it, Ctrl+click to switch it off.")
