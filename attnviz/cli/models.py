"""``attnviz models``: the models this machine holds under a name (bundled, the Hugging Face cache, Ollama's
store), with their sizes; ``attnviz fetch ORG/NAME``: download a Hugging Face model into the cache (through
``huggingface_hub``, the optional ``hub`` extra: progress, resumable), after which ``-m ORG/NAME`` opens it.

Only what attnviz reads is fetched (configs, tokenizers, chat templates, safetensors weights, or the GGUF file
named): never a pickled ``.bin``/``.pt`` file, which attnviz would not unpickle anyway.
"""

from __future__ import annotations

import argparse
import sys

from attnviz.engine.errors import InputError

WANTED = ["*.json", "*.safetensors", "*.jinja", "tokenizer.model", "*.txt"]


def add_commands(sub) -> None:
    p = sub.add_parser("models", help="list the models on this machine: bundled, Hugging Face cache, Ollama",
                       description="Every model -m can name without a path: the bundled checkpoints, the Hugging "
                                   "Face cache's models (HF_HUB_CACHE / HF_HOME) as ORG/NAME and Ollama's "
                                   "(OLLAMA_MODELS) as ollama:NAME:TAG, with their sizes on disk.")
    p.add_argument("--json", action="store_true", help="print the list as JSON")
    p.set_defaults(func=cmd_models)
    f = sub.add_parser("fetch", help="download a Hugging Face model into the cache (needs huggingface_hub)",
                       description="Download ORG/NAME (or one GGUF file of it: ORG/NAME/FILE.gguf) into the Hugging "
                                   "Face cache, resuming a broken download; then -m ORG/NAME opens it offline. Only "
                                   "configs, tokenizers and safetensors weights are fetched, never pickled files.")
    f.add_argument("name", help="a Hugging Face model name, e.g. Qwen/Qwen2.5-0.5B-Instruct")
    f.add_argument("--revision", help="a branch, tag or commit (default: main)")
    f.set_defaults(func=cmd_fetch)


def cmd_models(args: argparse.Namespace) -> int:
    from attnviz.cli.jsonout import json_text
    from attnviz.engine.hub.names import hub_cache, named_models, ollama_store
    from attnviz.paths import bundled_model_files

    found: list[dict[str, str | int]] = [{"name": p.stem, "path": str(p), "size": p.stat().st_size, "source": "bundled"}
             for p in bundled_model_files()]
    found += [{"name": m.name, "path": str(m.path), "size": m.size, "source": m.source} for m in named_models()]
    if args.json:
        print(json_text({"models": found, "hub_cache": str(hub_cache()), "ollama": str(ollama_store())}))
        return 0
    for entry in found:
        print(f"{entry['name']:<48} {int(entry['size']) / 2**30:7.2f} GiB  {entry['source']}")
    print(f"(Hugging Face cache: {hub_cache()}; Ollama: {ollama_store()})", file=sys.stderr)
    return 0


def cmd_fetch(args: argparse.Namespace) -> int:
    from attnviz.engine.hub.names import HUB_NAME, hub_cache, model_path

    match = HUB_NAME.match(args.name)
    if match is None:
        raise InputError(f"{args.name!r:.80} is not a Hugging Face model name: give ORG/NAME (or "
                         "ORG/NAME/FILE.gguf for one GGUF file of it).")
    try:
        import huggingface_hub
    except ImportError:
        raise InputError("attnviz fetch downloads through huggingface_hub, which is not installed: "
                         "pip install 'attnviz[hub]' (or pip install huggingface_hub).") from None
    repo = f"{match[1]}/{match[2]}"
    try:
        huggingface_hub.snapshot_download(repo, revision=args.revision, cache_dir=hub_cache(),
                                          allow_patterns=[match[3]] if match[3] else WANTED)
    except Exception as exc:  # huggingface_hub's errors (offline, no such repository, gated) and the network's
        text = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else type(exc).__name__
        raise InputError(f"could not fetch {repo} from the Hugging Face Hub ({text}); check the name and the "
                         "network (offline, the cache serves only what was fetched before).") from None
    print(model_path(args.name))
    return 0
