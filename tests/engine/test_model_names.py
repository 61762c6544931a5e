"""Models by their names: a Hugging Face cache and an Ollama store laid out in a temporary folder exactly as the
real tools lay them out (refs, snapshots of symbolic links into blobs; manifests naming a blob by digest), resolved
offline by ``-m ORG/NAME`` and ``-m ollama:NAME[:TAG]`` to the same model as its path, listed by ``attnviz models``,
and every broken layout refused in one line that says what to do."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from attnviz.cli.main import main
from attnviz.engine.config import DecodeConfig
from attnviz.engine.errors import CheckpointError
from attnviz.engine.hub.names import model_path, named_models
from attnviz.engine.loading import load_translator, read_card
from tests.gguf_file import write_gguf
from tests.llm_folder import make_llm_folder

pytest.importorskip("transformers")
COMMIT = "0123456789abcdef0123456789abcdef01234567"
SENTENCE = "Der Mann sieht den Hund."


def hub_repo(cache: Path, repo: str, files: dict[str, Path], commit: str = COMMIT) -> Path:
    """``files`` (name in the repository -> a file here) cached as huggingface_hub caches them."""
    root = cache / f"models--{repo.replace('/', '--')}"
    (root / "refs").mkdir(parents=True, exist_ok=True)
    (root / "refs" / "main").write_text(commit)
    snapshot = root / "snapshots" / commit
    snapshot.mkdir(parents=True, exist_ok=True)
    (root / "blobs").mkdir(exist_ok=True)
    for name, source in files.items():
        data = source.read_bytes()
        blob = root / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        os.symlink(os.path.relpath(blob, snapshot), snapshot / name)
    return snapshot


def ollama_model(store: Path, name: str, tag: str, gguf: Path) -> Path:
    data = gguf.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    (store / "blobs").mkdir(parents=True, exist_ok=True)
    (store / "blobs" / f"sha256-{digest}").write_bytes(data)
    manifest = store / "manifests" / "registry.ollama.ai" / "library" / name / tag
    manifest.parent.mkdir(parents=True, exist_ok=True)
    manifest.write_text(json.dumps({"schemaVersion": 2, "layers": [
        {"mediaType": "application/vnd.ollama.image.template", "digest": "sha256:" + "0" * 64, "size": 10},
        {"mediaType": "application/vnd.ollama.image.model", "digest": f"sha256:{digest}", "size": len(data)}]}))
    return manifest


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    root = tmp_path_factory.mktemp("names")
    folder = make_llm_folder(root, "qwen2")
    gguf = write_gguf(folder, root / "tiny.gguf", "Q8_0")
    cache, store = root / "hf", root / "ollama"
    hub_repo(cache, "acme/tiny-qwen", {p.name: p for p in folder.iterdir()})
    hub_repo(cache, "acme/tiny-GGUF", {"tiny-q8_0.gguf": gguf})
    ollama_model(store, "tiny", "q8", gguf)
    return folder, gguf, cache, store


@pytest.fixture()
def env(stores, monkeypatch):
    folder, gguf, cache, store = stores
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("OLLAMA_MODELS", str(store))
    return stores


def test_names_resolve_offline_to_the_same_models_as_their_paths(env):
    folder, gguf, cache, _ = env
    assert model_path("acme/tiny-qwen") == cache / "models--acme--tiny-qwen" / "snapshots" / COMMIT
    assert model_path("acme/tiny-GGUF").name == "tiny-q8_0.gguf"  # the one GGUF file of a GGUF repository
    assert model_path("acme/tiny-GGUF/tiny-q8_0.gguf") == model_path("acme/tiny-GGUF")
    assert model_path("ollama:tiny:q8").read_bytes() == gguf.read_bytes()
    decode = DecodeConfig(max_len=6)
    by_path = load_translator(folder).translate(SENTENCE, decode).tokens
    assert load_translator("acme/tiny-qwen").translate(SENTENCE, decode).tokens == by_path
    from_file = load_translator(gguf).translate(SENTENCE, decode).tokens
    assert load_translator("ollama:tiny:q8").translate(SENTENCE, decode).tokens == from_file
    assert read_card("acme/tiny-GGUF").parameters == read_card(gguf).parameters
    import attnviz

    assert list(attnviz.load("ollama:tiny:q8").translate(SENTENCE, max_len=6).tokens) == list(from_file)


def test_the_models_command_lists_both_stores_with_sizes(env, capsys):
    _, gguf, _, _ = env
    found = {m.name: m for m in named_models()}
    assert set(found) >= {"acme/tiny-qwen", "acme/tiny-GGUF", "ollama:tiny:q8"}
    assert found["ollama:tiny:q8"].size == gguf.stat().st_size and found["ollama:tiny:q8"].source == "Ollama"
    assert main(["models", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["models"]
    assert {"acme/tiny-qwen", "ollama:tiny:q8"} <= {m["name"] for m in listed}
    assert main(["translate", "-m", "ollama:tiny:q8", "--max-len", "4", SENTENCE]) == 0


@pytest.mark.parametrize("name, said", [
    ("acme/absent", "is not in the Hugging Face cache"),
    ("acme/tiny-GGUF/other.gguf", "has no other.gguf"),
    ("ollama:absent", "pull it with `ollama pull absent`"),
    ("ollama:tiny:q4", "Ollama has no model tiny:q4"),
    ("ollama:../../etc/passwd", "is not an Ollama model name"),
    ("acme/tiny.safetensors", "no such file or folder"),
])
def test_a_name_that_resolves_to_nothing_says_what_to_do(env, name, said, capsys):
    with pytest.raises(CheckpointError) as err:
        model_path(name)
    assert said in str(err.value) and "\n" not in str(err.value)
    assert main(["info", name]) != 0 and said in capsys.readouterr().err


def test_a_broken_cache_or_store_is_refused_in_one_line(env, tmp_path, monkeypatch):
    folder, gguf, _, _ = env
    cache = tmp_path / "hf"
    hub_repo(cache, "acme/moved", {"config.json": folder / "config.json"})
    (cache / "models--acme--moved" / "refs" / "main").write_text("f" * 40)  # a commit the cache lacks
    hub_repo(cache, "acme/partial", {"README.md": folder / "config.json"})
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    with pytest.raises(CheckpointError, match="which the cache does not hold"):
        model_path("acme/moved")
    with pytest.raises(CheckpointError, match="the download is incomplete"):
        model_path("acme/partial")
    store = tmp_path / "ollama"
    manifest = ollama_model(store, "bad", "latest", gguf)
    manifest.write_text(json.dumps({"layers": [{"mediaType": "application/vnd.ollama.image.model",
                                                "digest": "sha256:../../x"}]}))
    monkeypatch.setenv("OLLAMA_MODELS", str(store))
    with pytest.raises(CheckpointError, match="names no model layer"):
        model_path("ollama:bad")


def test_fetch_offline_says_so_in_one_line(env, monkeypatch, capsys):
    pytest.importorskip("huggingface_hub")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["fetch", "acme/not-cached"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("attnviz: error: could not fetch acme/not-cached") and "\n" not in err
    assert main(["fetch", "not a name"]) == 2 and "not a Hugging Face model name" in capsys.readouterr().err
