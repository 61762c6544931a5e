"""The import contract that keeps attribution and analysis on the network protocol covers every network module:
a module added to ``engine.models`` is either one of the doors (protocol, probe points, torch-free descriptions) or
forbidden, so a new network cannot be reached around the protocol unnoticed."""

from __future__ import annotations

import pkgutil
import tomllib
from pathlib import Path

import attnviz.engine.models

ROOT = Path(__file__).resolve().parents[1]
DOORS = {"protocol", "probes", "llm_arch"}  # what attribution and analysis may import of engine.models


def _contract() -> dict:
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    return next(c for c in contracts if c.get("source_modules") == ["attnviz.engine.attribution",
                                                                     "attnviz.engine.analysis"])


def test_every_network_module_is_a_door_or_forbidden_to_attribution_and_analysis():
    modules = {m.name for m in pkgutil.iter_modules(attnviz.engine.models.__path__)}
    forbidden = {name.rsplit(".", 1)[1] for name in _contract()["forbidden_modules"]}
    assert DOORS <= modules
    assert modules - DOORS == forbidden, "list the new module in the contract's forbidden_modules or in DOORS"



def test_the_gui_holds_only_qt_modules_and_the_session_none():
    """What needs no Qt lives in ``attnviz.session`` (documents the GUI draws and the notebook API reuses), so
    every module of ``attnviz.gui`` imports Qt itself; the session's modules never do (the Qt contract)."""
    gui, session = ROOT / "attnviz" / "gui", ROOT / "attnviz" / "session"
    qt_free = [str(p.relative_to(ROOT)) for p in gui.rglob("*.py")
               if p.name != "__init__.py" and "PySide6" not in p.read_text() and "shiboken6" not in p.read_text()]
    assert qt_free == [], "move these Qt-free modules to attnviz/session"
    assert all("PySide6" not in p.read_text() for p in session.rglob("*.py"))
    assert "attnviz.session" in _contract_named("never import Qt")["source_modules"]


def _contract_named(words: str) -> dict:
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    return next(c for c in contracts if words in c["name"])
