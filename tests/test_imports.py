"""Architecture rule 1: the engine and the package root import without Qt (and without matplotlib)."""

import subprocess
import sys


def modules_after_import(statement: str) -> set[str]:
    code = f"import sys; {statement}; print(' '.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    return set(out.stdout.split())


def test_engine_never_imports_qt_or_matplotlib():
    loaded = modules_after_import(
        "import attnviz.engine.translator, attnviz.engine.search.greedy, attnviz.engine.checkpoints.store, "
        "attnviz.cli.main")
    assert "torch" in loaded
    assert not {m for m in loaded if m.startswith(("PySide6", "matplotlib"))}


def test_package_root_is_light():
    loaded = modules_after_import("import attnviz")
    assert not {"torch", "spacy", "PySide6"} & loaded


def test_command_line_imports_the_gui_only_to_start_it():
    """Building the parser (every command module) and finding the default model load no GUI module and no Qt."""
    loaded = modules_after_import(
        "import attnviz.cli.main, attnviz.cli.batch, attnviz.cli.progress, attnviz.cli.translate as t; "
        "attnviz.cli.main.build_parser(); t.default_model_path() and t._default_model()")
    assert not {m for m in loaded if m.startswith(("attnviz.gui", "PySide6"))}
    assert not {"torch", "spacy"} & loaded  # `attnviz --help` stays quick


def test_describing_a_model_needs_no_torch():
    """Every folder format's module (discovered by ``all_formats``) and a checkpoint's card load without torch."""
    loaded = modules_after_import(
        "from attnviz.engine.hub import all_formats; from attnviz.engine.loading import read_card; "
        "from attnviz.paths import models_dir; assert all_formats(); "
        "[read_card(p) for p in sorted(models_dir().glob('*.safetensors'))]")
    assert "attnviz.engine.hub.registry" in loaded and "attnviz.engine.kinds.registry" in loaded
    assert "torch" not in loaded


def test_notebook_api_imports_without_torch_qt_or_drawing():
    """``import attnviz.api`` (and ``attnviz.load``'s module) load no torch, Qt, matplotlib or pandas: those come
    with the first model loaded, map drawn or table made."""
    loaded = modules_after_import("import attnviz, attnviz.api; attnviz.api.bundled()")
    assert not {m for m in loaded if m.split(".")[0] in ("torch", "PySide6", "matplotlib", "pandas", "spacy")}
    assert "attnviz.api.model" in loaded
