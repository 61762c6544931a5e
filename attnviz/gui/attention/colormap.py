"""Attention matrices to images: viridis and a diverging lookup table, numpy -> QImage (no matplotlib needed).

Weights and other non-negative figures use viridis; signed figures (a difference between two models, the BLEU a
head is worth) use a diverging blue-white-red scale centred on zero, so the sign reads at a glance."""

from __future__ import annotations

import functools

import numpy as np
from PySide6.QtGui import QColor, QImage

# viridis sampled at 0, 1/8, ..., 1; interpolated to 256 entries (perceptually uniform, colour-blind safe)
_ANCHORS = np.array([(68, 1, 84), (71, 44, 122), (59, 81, 139), (44, 113, 142), (33, 144, 141), (39, 173, 129),
                     (92, 200, 99), (170, 220, 50), (253, 231, 37)], dtype=np.float64)
LUT = np.stack([np.interp(np.linspace(0, 1, 256), np.linspace(0, 1, len(_ANCHORS)), _ANCHORS[:, c])
                for c in range(3)], axis=1).round().astype(np.uint8)  # [256, 3]


# ColorBrewer RdBu reversed: blue below zero, white at zero, red above (colour-blind safe)
_DIVERGING = np.array([(33, 102, 172), (67, 147, 195), (146, 197, 222), (209, 229, 240), (247, 247, 247),
                       (253, 219, 199), (244, 165, 130), (214, 96, 77), (178, 24, 43)], dtype=np.float64)
DIVERGING_LUT = np.stack([np.interp(np.linspace(0, 1, 256), np.linspace(0, 1, len(_DIVERGING)), _DIVERGING[:, c])
                          for c in range(3)], axis=1).round().astype(np.uint8)  # [256, 3]


def signed_limit(matrix: np.ndarray) -> float:
    """The half-width of a signed scale: the largest magnitude (1 for an all-zero or empty matrix)."""
    m = float(np.nanmax(np.abs(matrix))) if matrix.size and not np.isnan(matrix).all() else 0.0
    return m if m > 0 else 1.0


def normalise(matrix: np.ndarray, per_map: bool) -> np.ndarray:
    """Values in 0..1: fixed scale clips to 0..1 (attention weights); per-map stretches min..max."""
    if per_map and matrix.size:
        lo, hi = float(matrix.min()), float(matrix.max())
        return (matrix - lo) / (hi - lo) if hi > lo else np.zeros_like(matrix)
    return np.clip(matrix, 0.0, 1.0)


HIDDEN_GREY, HIDDEN_STRIPE = (150, 150, 150), (110, 110, 110)  # cells no weight can reach, as the large map hatches


def to_image(matrix: np.ndarray, per_map: bool = False, signed: bool = False,
             hidden: np.ndarray | None = None) -> QImage:
    """A [R, C] matrix as an RGB image of R x C pixels (scale it when painting); ``signed``: the diverging scale
    from -m to m, m the largest magnitude. NaN (nothing measured) is drawn as the scale's zero. ``hidden`` [R, C]
    True at cells zero by construction (outside a sliding window): grey, every third diagonal of cells darker, so
    they do not read as a weight of zero even in a small map."""
    if signed:
        values, lut = (np.clip(np.nan_to_num(matrix) / signed_limit(matrix), -1.0, 1.0) + 1) / 2, DIVERGING_LUT
    else:
        values, lut = np.nan_to_num(normalise(matrix, per_map)), LUT
    rgb = np.ascontiguousarray(lut[(values * 255).round().astype(np.intp)])  # [R, C, 3]
    rows, cols = matrix.shape
    if hidden is not None and hidden.shape == matrix.shape and hidden.any():
        i, j = np.nonzero(hidden)
        rgb[i, j] = np.where(((i - j) % 3 == 0)[:, None], HIDDEN_STRIPE, HIDDEN_GREY)
    image = QImage(rgb.data, cols, rows, cols * 3, QImage.Format.Format_RGB888)
    return image.copy()  # own the pixels: the numpy buffer goes away


def to_images(maps: np.ndarray, per_map: bool = False, signed: bool = False,
              hidden: list[np.ndarray | None] | None = None) -> list[list[QImage]]:
    """``maps`` [L, H, R, C] as ``to_image`` draws each [R, C] map, coloured in one pass over the whole array (a
    grid of 24 x 14 heads took one numpy round per map); ``hidden`` per layer as ``to_image``'s."""
    if maps.ndim != 4 or not maps.size:
        return [[to_image(m, per_map, signed, None) for m in layer] for layer in maps]
    clean = np.nan_to_num(maps)
    if signed:
        limit = np.abs(clean).max(axis=(2, 3), keepdims=True)  # ``signed_limit`` of each map: NaN is no magnitude
        limit = np.where(limit > 0, limit, 1.0)
        values, lut = (np.clip(clean / limit, -1.0, 1.0) + 1) / 2, DIVERGING_LUT
    elif per_map:
        lo, hi = maps.min(axis=(2, 3), keepdims=True), maps.max(axis=(2, 3), keepdims=True)
        span = hi - lo
        values = np.nan_to_num(np.divide(maps - lo, span, out=np.zeros_like(maps), where=span > 0))
        lut = LUT
    else:
        values, lut = np.clip(clean, 0.0, 1.0), LUT
    rgb = lut[(values * 255).round().astype(np.intp)]  # [L, H, R, C, 3]
    rows, cols = maps.shape[2:]
    images = []
    for i in range(maps.shape[0]):
        layer = rgb[i]
        mask = hidden[i] if hidden is not None and i < len(hidden) else None
        if mask is not None and mask.shape == (rows, cols) and mask.any():
            r, c = np.nonzero(mask)
            layer = layer.copy()
            layer[:, r, c] = np.where(((r - c) % 3 == 0)[:, None], HIDDEN_STRIPE, HIDDEN_GREY)
        row = []
        for head in layer:
            pixels = np.ascontiguousarray(head)
            row.append(QImage(pixels.data, cols, rows, cols * 3, QImage.Format.Format_RGB888).copy())
        images.append(row)
    return images


@functools.cache
def scale_image(signed: bool = False) -> QImage:
    """The colour scale as an image one pixel wide, its top the scale's top (a colour bar draws it stretched: one
    image instead of a pen and a line per pixel row)."""
    rgb = np.ascontiguousarray((DIVERGING_LUT if signed else LUT)[::-1][:, None, :])  # [256, 1, 3], top = 1
    return QImage(rgb.data, 1, rgb.shape[0], 3, QImage.Format.Format_RGB888).copy()


def color_at(value: float, signed: bool = False) -> QColor:
    """The colour at ``value`` in 0..1 of the scale (for a signed scale 0.5 is zero)."""
    value = 0.0 if value != value else value  # NaN (nothing to shade by): the scale's bottom, never a crash
    r, g, b = (DIVERGING_LUT if signed else LUT)[int(round(min(max(value, 0.0), 1.0) * 255))]
    return QColor(int(r), int(g), int(b))
