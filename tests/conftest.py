"""Shared fixtures: tiny seeded models (random and trained on a toy task) and the real-data directory."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import torch  # noqa: E402

torch.set_num_threads(1)  # tiny models run fastest on one thread, and CI machines are shared

from tests.helpers import make_toy_translator, train_toy  # noqa: E402


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The real corpora (``../shared/data``), found through ATTNVIZ_DATA; tests that need them skip without it."""
    value = os.environ.get("ATTNVIZ_DATA")
    if not value:
        pytest.skip("needs real data: set ATTNVIZ_DATA to the folder with the Multi30k and Tatoeba files")
    path = Path(value)
    if not (path / "multi30k_train.de.gz").exists():
        pytest.skip(f"ATTNVIZ_DATA={value} does not contain multi30k_train.de.gz")
    return path


@pytest.fixture()
def random_translator():
    return make_toy_translator(seed=0)


@pytest.fixture(scope="session")
def trained_translator():
    translator = make_toy_translator(seed=1)
    train_toy(translator, steps=600)
    return translator
