"""Models by the names people use, resolved to a path on this machine without a network: ``ORG/NAME`` (or
``ORG/NAME/FILE.gguf``) in the Hugging Face cache, ``ollama:NAME[:TAG]`` in Ollama's store; a path that exists is
itself. Nothing is downloaded here (``attnviz fetch`` does that, through ``huggingface_hub``).

The Hugging Face cache (``HF_HUB_CACHE``, else ``HF_HOME/hub``, else ``~/.cache/huggingface/hub``) holds a repository
as ``models--ORG--NAME/``: ``refs/main`` names the commit, ``snapshots/COMMIT/`` holds its files (symbolic links
into ``blobs/``). Ollama's store (``OLLAMA_MODELS``, else ``~/.ollama/models``) holds
``manifests/HOST/NAMESPACE/NAME/TAG`` (JSON; the model layer's digest) and ``blobs/sha256-HEX`` (the GGUF file).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from attnviz.engine.checkpoints.folder import read_object
from attnviz.engine.checkpoints.header import require_path
from attnviz.engine.errors import CheckpointError

OLLAMA = "ollama:"
OLLAMA_HOST, OLLAMA_NAMESPACE, OLLAMA_TAG = "registry.ollama.ai", "library", "latest"
MODEL_LAYER = "application/vnd.ollama.image.model"
PART = r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}"
HUB_NAME = re.compile(rf"^({PART})/({PART})(?:/({PART}\.gguf))?$")
OLLAMA_NAME = re.compile(rf"^(?:({PART})/)?(?:({PART})/)?({PART})(?::({PART}))?$")
FILE_SUFFIXES = (".safetensors", ".gguf")  # ORG/NAME.gguf is a mistyped path, not a repository
COMMIT = re.compile(r"^[0-9a-f]{40}$")
DIGEST = re.compile(r"^sha256[:-]([0-9a-f]{64})$")


@dataclass(frozen=True)
class NamedModel:
    """A model found under a name: what to type, where it lies, its size on disk and where it was found."""

    name: str
    path: Path
    size: int
    source: str  # "Hugging Face cache" or "Ollama"


def hub_cache() -> Path:
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]) / "hub"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "huggingface" / "hub"


def ollama_store() -> Path:
    return Path(os.environ["OLLAMA_MODELS"]) if os.environ.get("OLLAMA_MODELS") else Path.home() / ".ollama" / "models"


def _snapshot(repo: str) -> Path:
    root = hub_cache() / f"models--{repo.replace('/', '--')}"
    if not root.is_dir():
        raise CheckpointError(f"{repo} is not in the Hugging Face cache ({hub_cache()}); fetch it with `attnviz "
                              f"fetch {repo}` (it needs the internet), or give the model's path.")
    ref = root / "refs" / "main"
    commit = ref.read_text(encoding="utf-8", errors="replace").strip() if ref.is_file() else ""
    if not COMMIT.match(commit):
        snapshots = sorted((p for p in (root / "snapshots").glob("*") if p.is_dir()), key=lambda p: p.stat().st_mtime)
        if not snapshots:
            raise CheckpointError(f"{repo}: the Hugging Face cache holds no snapshot of it ({root}); fetch it again "
                                  f"with `attnviz fetch {repo}`.")
        return snapshots[-1]
    snapshot = root / "snapshots" / commit
    if not snapshot.is_dir():
        raise CheckpointError(f"{repo}: refs/main names commit {commit[:12]}, which the cache does not hold; fetch "
                              f"it again with `attnviz fetch {repo}`.")
    return snapshot


def hub_model(name: str) -> Path:
    """The folder (or GGUF file) of repository ``ORG/NAME[/FILE.gguf]`` in the Hugging Face cache."""
    match = HUB_NAME.match(name)
    if match is None:
        raise CheckpointError(f"{name!r:.80} is not a Hugging Face model name (ORG/NAME, or ORG/NAME/FILE.gguf).")
    repo, file = f"{match[1]}/{match[2]}", match[3]
    snapshot = _snapshot(repo)
    if file is not None:
        if not (snapshot / file).is_file():
            raise CheckpointError(f"{repo} in the Hugging Face cache has no {file}; fetch it with `attnviz fetch "
                                  f"{name}`.")
        return snapshot / file
    if (snapshot / "config.json").is_file():
        return snapshot
    ggufs = sorted(p.name for p in snapshot.glob("*.gguf"))
    if len(ggufs) == 1:
        return snapshot / ggufs[0]
    if ggufs:
        raise CheckpointError(f"{repo} holds {len(ggufs)} GGUF files ({', '.join(ggufs[:4])}...); name one: "
                              f"{repo}/{ggufs[0]}.")
    raise CheckpointError(f"{repo} in the Hugging Face cache has neither config.json nor a GGUF file ({snapshot}): "
                          f"the download is incomplete; fetch it again with `attnviz fetch {repo}`.")


def ollama_model(spec: str) -> Path:
    """The GGUF blob of Ollama model ``[HOST/][NAMESPACE/]NAME[:TAG]`` (``library`` and ``latest`` by default)."""
    match = OLLAMA_NAME.match(spec)
    if match is None:
        raise CheckpointError(f"{OLLAMA}{spec!r:.60} is not an Ollama model name (NAME, NAME:TAG, USER/NAME:TAG).")
    first, second, name, tag = match.groups()
    host, namespace = (first, second) if second else (OLLAMA_HOST, first or OLLAMA_NAMESPACE)
    manifest = ollama_store() / "manifests" / host / namespace / name / (tag or OLLAMA_TAG)
    if not manifest.is_file():
        raise CheckpointError(f"Ollama has no model {spec} in {ollama_store()} (no {manifest.name} manifest there); "
                              f"pull it with `ollama pull {spec}`, or set OLLAMA_MODELS to the store's folder.")
    layers = read_object(manifest).get("layers")
    digests = [layer.get("digest") for layer in layers if isinstance(layer, dict)
               and layer.get("mediaType") == MODEL_LAYER] if isinstance(layers, list) else []
    found = DIGEST.match(digests[0]) if digests and isinstance(digests[0], str) else None
    if found is None:
        raise CheckpointError(f"{manifest}: Ollama's manifest of {spec} names no model layer (a sha256 digest of "
                              f"{MODEL_LAYER}); pull it again with `ollama pull {spec}`.")
    blob = ollama_store() / "blobs" / f"sha256-{found[1]}"
    if not blob.is_file():
        raise CheckpointError(f"Ollama's store lacks the blob of {spec} ({blob.name}); pull it again with "
                              f"`ollama pull {spec}`.")
    return blob


def model_path(name: str | os.PathLike[str]) -> Path:
    """``name`` as a path: itself when something is there, else an Ollama or Hugging Face name resolved; a
    CheckpointError saying what was looked for otherwise (checked before anything heavy is imported)."""
    path = Path(name)
    if path.exists():
        return path
    text = str(name)
    if text.startswith(OLLAMA):
        return ollama_model(text[len(OLLAMA):])
    match = HUB_NAME.match(text)
    if match and not path.parent.is_dir() and (match[3] or not text.endswith(FILE_SUFFIXES)):
        return hub_model(text)
    return require_path(path)  # says that nothing is there


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.iterdir() if p.is_file())  # follows the cache's links to blobs


def named_models() -> list[NamedModel]:
    """Every model the Hugging Face cache and Ollama's store hold that a name resolves to (the model picker's)."""
    found = []
    for root in sorted(hub_cache().glob("models--*--*")) if hub_cache().is_dir() else []:
        repo = root.name.removeprefix("models--").replace("--", "/", 1)
        try:
            path = hub_model(repo)
        except CheckpointError:
            continue
        found.append(NamedModel(repo, path, _size(path), "Hugging Face cache"))
    manifests = ollama_store() / "manifests"
    for manifest in sorted(manifests.glob("*/*/*/*")) if manifests.is_dir() else []:
        host, namespace, name, tag = manifest.relative_to(manifests).parts
        spec = (f"{name}:{tag}" if (host, namespace) == (OLLAMA_HOST, OLLAMA_NAMESPACE) else
                f"{namespace}/{name}:{tag}" if host == OLLAMA_HOST else f"{host}/{namespace}/{name}:{tag}")
        try:
            path = ollama_model(spec)
        except CheckpointError:
            continue
        found.append(NamedModel(OLLAMA + spec, path, _size(path), "Ollama"))
    return found


def name_of(path: str | os.PathLike[str]) -> str | None:
    """The name a model in the Hugging Face cache or Ollama's store goes by (what ``model_path`` resolves), from
    its path; None for any other path."""
    path = Path(path)
    parts = path.parts
    if "snapshots" in parts:
        at = len(parts) - 1 - parts[::-1].index("snapshots")
        if at >= 1 and parts[at - 1].startswith("models--") and at + 1 < len(parts):
            repo = parts[at - 1].removeprefix("models--").replace("--", "/", 1)
            rest = parts[at + 2:]
            return repo + (f"/{rest[-1]}" if rest and rest[-1].endswith(".gguf") else "")
    if path.name.startswith("sha256-"):
        return next((m.name for m in named_models() if m.path == path), None)
    return None
