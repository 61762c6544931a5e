"""``attnviz --self-test``: prove an installation (or a PyInstaller bundle) works, without showing a window.

It builds the Qt application and main window offscreen (icon, stylesheet and Qt plugins must be found), loads the
default bundled model, translates a fixed sentence, checks every attention map's shape and that its rows are
probability distributions, prints one JSON line and returns 0; any failure returns 1 with the reason.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

from attnviz.cli.jsonout import json_text

SENTENCE = "Zwei Hunde spielen im Schnee."


class SelfTestError(Exception):
    pass


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise SelfTestError(message)


def _check_gui() -> dict:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QSettings

    from attnviz.gui.app import make_app
    from attnviz.gui.main_window import MainWindow

    app = make_app()
    _check(not app.windowIcon().isNull(), "the application icon (resources/attnviz.svg) could not be loaded")
    _check(bool(app.styleSheet()), "the stylesheet (resources/style.qss) could not be read")
    with tempfile.TemporaryDirectory() as tmp:  # never touch the user's settings
        window = MainWindow(QSettings(os.path.join(tmp, "cli.selftest.ini"), QSettings.Format.IniFormat))
        title = window.windowTitle()
        window.deleteLater()
    return {"platform": app.platformName(), "window_title": title}


def _check_translation() -> dict:
    import numpy as np

    from attnviz.engine.loading import load_translator
    from attnviz.paths import default_model_path

    path = default_model_path()
    if path is None:
        raise SelfTestError("no bundled model was found in models/")
    translator = load_translator(path)
    cfg = translator.config
    result = translator.translate(SENTENCE)
    _check(bool(result.text.strip()), f"the default model translated {SENTENCE!r} to nothing")
    expected = translator.kind.expected_shapes(cfg, len(result.src_tokens), len(result.tokens))
    shapes = {}
    for kind, shape in expected.items():
        _check(kind in result.attention, f"the model produced no {kind} attention")
        maps = result.attention[kind]
        shapes[kind] = list(maps.shape)
        _check(maps.shape == shape, f"{kind} attention has shape {maps.shape}, expected {shape}")
        sums = maps.sum(axis=-1)
        _check(bool(np.allclose(sums, 1.0, atol=1e-3)), f"{kind} attention rows do not sum to 1")
    return {"model": translator.info.get("name") or os.path.basename(path), "source": SENTENCE,
            "translation": result.text, "attention_shapes": shapes}


def run_self_test() -> int:
    started = time.perf_counter()
    report: dict = {"ok": False, "frozen": bool(getattr(sys, "frozen", False))}
    try:
        report |= _check_gui()
        report |= _check_translation()
        report["ok"] = True
    except SelfTestError as exc:
        report["error"] = str(exc)
    except Exception as exc:  # the point of a self-test is to report what broke, whatever it is
        report["error"] = f"{type(exc).__name__}: {exc}"
    report["seconds"] = round(time.perf_counter() - started, 2)
    print(json_text(report, ensure_ascii=False), flush=True)
    if not report["ok"]:
        print(f"attnviz: self-test failed: {report['error']}", file=sys.stderr)
        return 1
    return 0
