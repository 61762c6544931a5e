"""The house rules that keep the code livable, checked on the source itself: small modules and functions, and model
kinds and imported folder formats named only by their own modules (everything else asks the registries)."""

from __future__ import annotations

import ast
from pathlib import Path

from attnviz.engine.hub import all_formats
from attnviz.engine.kinds import all_kinds

PACKAGE = Path(__file__).resolve().parent.parent / "attnviz"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
# a kind's companion modules: the MarianMT folder reader checks Hugging Face's own model_type "marian"; the config
# names its default kind, since the registry sits above it (``engine.kinds.transformer`` registers that name)
COMPANIONS = {"engine/hub/marian_files.py": {"marian"}, "engine/config.py": {"transformer"},
              "engine/hub/fairseq_files.py": {"mbart"}}  # mBART folders' config.json model_type


def _modules():
    return sorted(PACKAGE.rglob("*.py"))


def test_no_module_over_400_lines_and_no_function_over_60():
    too_long = []
    for path in _modules():
        source = path.read_text(encoding="utf-8")
        if source.count("\n") > MAX_MODULE_LINES:
            too_long.append(f"{path.relative_to(PACKAGE)}: {source.count(chr(10))} lines")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    too_long.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name}: {length} lines")
    assert not too_long, too_long


def test_only_a_kinds_own_module_names_it():
    names = {kind.name for kind in all_kinds()}
    kinds_dir = PACKAGE / "engine" / "kinds"
    found = []
    for path in _modules():
        if path.parent == kinds_dir:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            allowed = COMPANIONS.get(path.relative_to(PACKAGE).as_posix(), set())
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names - allowed:
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.value!r}")
    assert not found, f"ask the registry (attnviz.engine.kinds) instead of naming a kind: {found}"


def test_only_the_hub_names_an_imported_folder_format():
    names = {fmt.name for fmt in all_formats()}
    hub_dir = PACKAGE / "engine" / "hub"
    found = [f"{path.relative_to(PACKAGE)}:{node.lineno} {node.value!r}" for path in _modules()
             if path.parent != hub_dir for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
             if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names]
    assert names and not found, f"ask the registry (attnviz.engine.hub) instead of naming a format: {found}"
