"""The one place that knows where resources and bundled models live, from source and when frozen by PyInstaller."""

from __future__ import annotations

import sys
from pathlib import Path


def app_root() -> Path:
    """The folder holding ``resources/`` and ``models/``: the bundle when frozen, else the source checkout."""
    if getattr(sys, "frozen", False):
        return Path(getattr(sys, "_MEIPASS", Path(sys.executable).parent))
    return Path(__file__).resolve().parents[1]


def resources_dir() -> Path:
    return app_root() / "resources"


def models_dir() -> Path:
    return app_root() / "models"
