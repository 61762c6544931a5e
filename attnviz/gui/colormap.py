"""Attention matrices to images: a viridis lookup table and numpy -> QImage conversion (no matplotlib needed)."""

from __future__ import annotations

import numpy as np
from PySide6.QtGui import QColor, QImage

# viridis sampled at 0, 1/8, ..., 1; interpolated to 256 entries (perceptually uniform, colour-blind safe)
_ANCHORS = np.array([(68, 1, 84), (71, 44, 122), (59, 81, 139), (44, 113, 142), (33, 144, 141), (39, 173, 129),
                     (92, 200, 99), (170, 220, 50), (253, 231, 37)], dtype=np.float64)
LUT = np.stack([np.interp(np.linspace(0, 1, 256), np.linspace(0, 1, len(_ANCHORS)), _ANCHORS[:, c])
                for c in range(3)], axis=1).round().astype(np.uint8)  # [256, 3]


def normalise(matrix: np.ndarray, per_map: bool) -> np.ndarray:
    """Values in 0..1: fixed scale clips to 0..1 (attention weights); per-map stretches min..max."""
    if per_map and matrix.size:
        lo, hi = float(matrix.min()), float(matrix.max())
        return (matrix - lo) / (hi - lo) if hi > lo else np.zeros_like(matrix)
    return np.clip(matrix, 0.0, 1.0)


def to_image(matrix: np.ndarray, per_map: bool = False) -> QImage:
    """A [R, C] matrix as an RGB image of R x C pixels (scale it when painting)."""
    rgb = np.ascontiguousarray(LUT[(normalise(matrix, per_map) * 255).round().astype(np.intp)])  # [R, C, 3]
    rows, cols = matrix.shape
    image = QImage(rgb.data, cols, rows, cols * 3, QImage.Format.Format_RGB888)
    return image.copy()  # own the pixels: the numpy buffer goes away


def color_at(value: float) -> QColor:
    r, g, b = LUT[int(round(min(max(value, 0.0), 1.0) * 255))]
    return QColor(int(r), int(g), int(b))
