"""The one place that knows where resources and bundled models live, from source and when frozen by PyInstaller,
and which bundled model opens first (the app's picker, ``attnviz translate`` without ``-m`` and the self-test)."""

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


DEFAULT_MODEL = "de-en-multi30k.safetensors"


def bundled_model_files() -> list[Path]:
    """The bundled checkpoints, the default model first, then by name."""
    return sorted(models_dir().glob("*.safetensors"), key=lambda p: (p.name != DEFAULT_MODEL, p.name))


def default_model_path() -> str | None:
    """The bundled model opened when none is named; None when no model is bundled."""
    files = bundled_model_files()
    return str(files[0]) if files else None
