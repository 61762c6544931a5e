"""No import cycles in attnviz, counting every import: module level, inside functions and under TYPE_CHECKING.

import-linter's layers contracts (pyproject.toml) name the floors; this test catches what they cannot see: a cycle
inside one floor, or one hidden behind a late import. A late import that closes a circle is a design knot to untie
(move the shared thing down a floor), not a fix.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "attnviz"


def module_names(package: Path) -> dict[str, Path]:
    """Dotted name -> file for every module of ``package`` (a package is named by its ``__init__``)."""
    names = {}
    for path in package.rglob("*.py"):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def _target(name: str, modules: dict[str, Path]) -> str | None:
    """The module ``name`` refers to: itself, or the closest enclosing module (``pkg.mod.func`` -> ``pkg.mod``)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _imported(node: ast.AST, package: str) -> list[str]:
    """Dotted names one import statement reads (``from a import b`` reads ``a.b``, which may be a module)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:  # relative: climb level - 1 packages up from this module's package
            anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
            base = ".".join(anchor + ([base] if base else []))
        return [f"{base}.{alias.name}" for alias in node.names] + [base]
    return []


def import_graph(package: Path) -> dict[str, set[str]]:
    """Module -> the package's modules it imports, from every import statement anywhere in its source."""
    modules = module_names(package)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            for dotted in _imported(node, here):
                target = _target(dotted, modules)
                if target and target != name:
                    graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_attnviz_has_no_import_cycle():
    graph = import_graph(ROOT)
    assert len(graph) > 100 and sum(map(len, graph.values())) > 300  # the whole package was read
    assert cycles(graph) == []


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "pkg"


def test_a_cycle_behind_a_function_level_import_is_found(tmp_path):
    package = _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/low.py": "def f():\n    from pkg.high import g\n    return g\n",
        "pkg/high.py": "from pkg import low\n",
        "pkg/side.py": "import pkg.low\n",
    })
    assert cycles(import_graph(package)) == [["pkg.high", "pkg.low"]]


def test_a_cycle_behind_type_checking_and_relative_imports_is_found(tmp_path):
    package = _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/sub/__init__.py": "",
        "pkg/sub/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..b import B\n",
        "pkg/b.py": "from pkg.sub.a import thing\n",
    })
    graph = import_graph(package)
    assert graph["pkg.sub.a"] == {"pkg.b"} and graph["pkg.b"] == {"pkg.sub.a"}
    assert cycles(graph) == [["pkg.b", "pkg.sub.a"]]


def test_imports_of_names_and_of_outside_packages_are_not_cycles(tmp_path):
    package = _write(tmp_path, {
        "pkg/__init__.py": "from pkg.a import A\n",
        "pkg/a.py": "import os\nfrom collections import abc\nA = 1\n",
        "pkg/b.py": "from pkg import a\nfrom pkg.a import A\n",
    })
    graph = import_graph(package)
    assert graph == {"pkg": {"pkg.a"}, "pkg.a": set(), "pkg.b": {"pkg", "pkg.a"}}
    assert cycles(graph) == []
