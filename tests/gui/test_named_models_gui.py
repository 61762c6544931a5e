"""The model picker lists what the Hugging Face cache and Ollama's store hold (with sizes, no file read), a GGUF
file opens from it and translates, the open dialog offers every model file format, and a model too large for the
memory is refused in a dialog with both figures while the model in use stays."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QMessageBox

from attnviz.engine.checkpoints import memory
from attnviz.session.model_list import model_file_filter
from tests.gui.conftest import load, translate

pytest.importorskip("transformers")
from tests.engine.test_model_names import hub_repo, ollama_model  # noqa: E402  (needs transformers)
from tests.gguf_file import write_gguf  # noqa: E402
from tests.llm_folder import make_llm_folder  # noqa: E402

SENTENCE = "Der Mann sieht den Hund."


@pytest.fixture(scope="module")
def gguf(tmp_path_factory):
    root = tmp_path_factory.mktemp("named")
    return write_gguf(make_llm_folder(root, "qwen2"), root / "tiny.gguf", "Q8_0")


def test_the_picker_lists_cached_and_ollama_models_and_opens_one(qtbot, window, gguf, tmp_path, monkeypatch):
    hub_repo(tmp_path / "hf", "acme/tiny-GGUF", {"tiny-q8_0.gguf": gguf})
    ollama_model(tmp_path / "ollama", "tiny", "q8", gguf)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    monkeypatch.setenv("OLLAMA_MODELS", str(tmp_path / "ollama"))
    window.refresh_models()
    combo = window.model_combo
    labels = [combo.itemText(i) for i in range(combo.count())]
    hub = next(i for i, text in enumerate(labels) if text.startswith("Hugging Face cache: acme/tiny-GGUF"))
    ollama = next(i for i, text in enumerate(labels) if text.startswith("Ollama: ollama:tiny:q8"))
    assert "MiB" in labels[ollama] and "-m ollama:tiny:q8" in combo.itemData(ollama, 3)  # the tooltip names it
    assert labels[-1] == "Open model file..."
    combo.setCurrentIndex(ollama)
    combo.activated.emit(ollama)  # as a user's choice
    qtbot.waitUntil(lambda: window.translator is not None, timeout=30000)
    assert window.translator.metadata["path"] == combo.itemData(ollama)
    tab = translate(qtbot, window, SENTENCE)
    assert tab.document.steps and window.model_label.text().startswith("German")
    assert combo.itemText(combo.currentIndex()).startswith("Ollama: ollama:tiny:q8")
    assert hub != ollama


def test_the_open_dialog_offers_every_model_file_format():
    text = model_file_filter()
    assert text.startswith("Model files (*.safetensors *.gguf)") and "GGUF file (*.gguf)" in text
    assert text.endswith("All files (*)")


def test_a_model_too_large_is_refused_in_a_dialog_and_the_old_one_stays(qtbot, window, gguf, toy_checkpoint,
                                                                        tmp_path, monkeypatch):
    load(qtbot, window, toy_checkpoint)
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal: 32000000 kB\nMemAvailable:     100 kB\n")
    monkeypatch.setattr(memory, "MEMINFO", meminfo)
    shown: list[str] = []
    monkeypatch.setattr(QMessageBox, "warning", lambda parent, title, text: shown.append(text))
    window.load_model(str(gguf))
    qtbot.waitUntil(lambda: bool(shown), timeout=30000)
    assert "needs" in shown[0] and "0.1 MiB available" in shown[0] and "decode" in shown[0]
    assert "The current model stays loaded." in shown[0] and window.translator.metadata["path"] == toy_checkpoint
