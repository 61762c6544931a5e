"""An LLM folder's tokenizer (``tokenizer.json``, read by the ``tokenizers`` library) and its chat template
(rendered by ``jinja2``'s sandbox), checked before use, without torch.

The template is a program the folder's authors wrote: it runs in jinja2's immutable sandbox (no attribute of a
Python object outside what templates may read, no way to call into Python), with a budget of steps (a template that
loops for ever is stopped) and of output, and a template that raises says so in one line. What it is given is what
transformers' ``apply_chat_template`` gives it: ``messages``, ``add_generation_prompt``, the special tokens'
text, ``raise_exception`` and ``strftime_now``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from attnviz.engine.checkpoints.folder import AGAIN, parse_json, read_bytes, read_object
from attnviz.engine.errors import CheckpointError, InputError, is_panic
from attnviz.engine.text.tokenize import WORD_START

MAX_TOKENIZER_BYTES = 64 * 1024 * 1024  # Gemma 3's tokenizer.json is 33 MB
MODELS = ("BPE", "Unigram")
STEP_BUDGET = 2_000_000  # Python lines a template's render may run; real templates take a few thousand
MAX_PROMPT_CHARS = 1_000_000


def read_tokenizer(folder: Path, vocab: int) -> Any:
    """``tokenizer.json`` as a ``tokenizers.Tokenizer`` (``parse_tokenizer``)."""
    path = folder / "tokenizer.json"
    if not path.exists():
        raise CheckpointError(f"{folder} lacks tokenizer.json, which attnviz reads an LLM's text with; download the "
                              "whole folder.")
    return parse_tokenizer(path, read_bytes(path, MAX_TOKENIZER_BYTES), vocab)


def parse_tokenizer(path: Path | str, raw: bytes, vocab: int) -> Any:
    """The tokenizer ``raw`` holds (read from ``path``): a BPE or Unigram model whose ids fit the embedding's
    ``vocab`` rows, its JSON checked as every folder file's is (CheckpointError naming ``path`` otherwise)."""
    if len(raw) > MAX_TOKENIZER_BYTES:
        raise CheckpointError(f"{path} is larger than {MAX_TOKENIZER_BYTES // 2**20} MB, far beyond any model's "
                              f"tokenizer; {AGAIN}.")
    data = parse_json(path, raw)
    if not isinstance(data, dict):
        raise CheckpointError(f"{path} holds a {type(data).__name__}, not a JSON object: it is not a tokenizers "
                              f"file; {AGAIN}.")
    if not isinstance(data.get("model"), dict):
        raise CheckpointError(f"{path} has no model (a JSON object under 'model'): it is not a tokenizers file; "
                              f"{AGAIN}.")
    kind = data["model"].get("type") or ("BPE" if "merges" in data["model"] else None)
    if kind not in MODELS:
        raise CheckpointError(f"{path}: its model is {kind!r:.40}, but attnviz reads {' and '.join(MODELS)} "
                              "tokenizers (the subword models of every LLM family it opens).")
    from tokenizers import Tokenizer  # Rust, no torch: only when a folder is read

    try:
        tokenizer = Tokenizer.from_str(raw.decode("utf-8"))
    except BaseException as exc:  # tokenizers' own Exception with the parser's text, or a panic
        if not isinstance(exc, Exception) and not is_panic(exc):
            raise
        raise CheckpointError(f"{path} cannot be read by the tokenizers library ({str(exc)[:120]}); "
                              f"{AGAIN}.") from None
    size = tokenizer.get_vocab_size(with_added_tokens=True)
    top = max(tokenizer.get_vocab(with_added_tokens=True).values(), default=-1)
    shared = _shared_id(data["model"].get("vocab"))
    if shared is not None:
        raise CheckpointError(f"{path}: tokens {shared[1][:2]!r} share the id {shared[0]:,}, so reading them back "
                              f"would be ambiguous; {AGAIN}.")
    if top >= vocab:
        raise CheckpointError(f"{path} has token id {top:,}, but the model's embedding has {vocab:,} rows "
                              f"(config.json vocab_size); the tokenizer and the model do not belong together: "
                              f"{AGAIN}.")
    if size < 16:
        raise CheckpointError(f"{path} holds only {size} tokens; it cannot spell a language's text: {AGAIN}.")
    return tokenizer


def _shared_id(vocab: Any) -> tuple[int, list[str]] | None:
    """An id two tokens of a BPE model's vocabulary share (and those tokens), or None."""
    if not isinstance(vocab, dict):
        return None
    seen: dict[Any, str] = {}
    for token, index in vocab.items():
        if index in seen:
            return index, [seen[index], token]
        seen[index] = token
    return None


def byte_alphabet() -> dict[str, int]:
    """GPT-2's byte-level alphabet, reversed: the printable character standing for each byte -> the byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = list(printable), 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars, strict=True)}


def token_labels(tokenizer: Any, vocab: int) -> list[str]:
    """A readable label for each id below ``vocab``: a byte-level BPE token's text ("Ġthe" -> "▁the", "Ċ" -> a new
    line, UTF-8 split over tokens as ``\\xc3``), a SentencePiece-style token as it is; special tokens, and any label
    that would repeat another, keep the tokenizer's own string. Rows the tokenizer does not name: ``<unused:N>``."""
    from tokenizers import decoders

    raw = [tokenizer.id_to_token(i) or f"<unused:{i}>" for i in range(vocab)]
    if not isinstance(tokenizer.decoder, decoders.ByteLevel):
        return raw
    alphabet = byte_alphabet()
    special = {t.content for t in tokenizer.get_added_tokens_decoder().values()}
    labels, seen = [], set(raw)
    for token in raw:
        label = token
        if token not in special and all(c in alphabet for c in token):
            text = bytes(alphabet[c] for c in token).decode("utf-8", errors="backslashreplace")
            text = WORD_START + text[1:] if text.startswith(" ") and len(text) > 1 else text
            label = text if text not in seen else token
        seen.add(label)
        labels.append(label)
    return labels


def special_tokens(folder: Path) -> dict[str, str]:
    """The text of ``bos_token``/``eos_token``/``pad_token``/``unk_token`` as ``tokenizer_config.json`` gives it."""
    path = folder / "tokenizer_config.json"
    config = read_object(path) if path.exists() else {}
    found = {}
    for name in ("bos_token", "eos_token", "pad_token", "unk_token"):
        value = config.get(name)
        value = value.get("content") if isinstance(value, dict) else value
        if isinstance(value, str):
            found[name] = value
    return found


def _raise(message: Any) -> None:
    raise InputError(f"The model's chat template refused the prompt: {str(message)[:200]}")


def _environment() -> Any:
    from attnviz.engine.hub.llm_sandbox import sandbox  # jinja2: only when a template is compiled

    return sandbox(_raise)


def compile_template(path: Path | str, source: str) -> Any:
    """The template, compiled in the bounded sandbox (CheckpointError naming ``path`` when it is not valid jinja,
    or compiling it fails in any other way: one line, never a traceback)."""
    try:
        return _environment().from_string(source)
    except Exception as exc:  # jinja2's TemplateError, and whatever its compiler raises on a hostile source
        raise CheckpointError(f"{path}: its chat template is not a valid template ({type(exc).__name__}: "
                              f"{str(exc)[:120]}); {AGAIN}.") from None


def render(template: Any, user: str, specials: dict[str, str]) -> str:
    """The chat template rendered for one user message, the generation prompt added; InputError when it raises,
    runs past its budget of steps or writes more than ``MAX_PROMPT_CHARS``."""
    steps = 0

    def budget(frame: Any, event: str, arg: Any) -> Any:
        nonlocal steps
        steps += 1
        if steps > STEP_BUDGET:
            raise InputError("The model's chat template ran past its budget of steps (it loops for ever or nearly); "
                             "give a prompt with --prompt instead, or fix the folder's template.")
        return budget

    context = {"messages": [{"role": "user", "content": user}], "add_generation_prompt": True, **specials}
    previous = sys.gettrace()
    sys.settrace(budget)
    try:
        text = template.render(**context)
    except InputError:
        raise
    except Exception as exc:  # a template's own errors, the sandbox's refusals, 1 / 0, MemoryError, OverflowError
        raise InputError(f"The model's chat template failed ({type(exc).__name__}: {str(exc)[:120]}); give a "
                         "prompt with --prompt instead.") from None
    finally:
        sys.settrace(previous)
    if len(text) > MAX_PROMPT_CHARS:
        raise InputError(f"The model's chat template wrote {len(text):,} characters for one sentence; it is broken. "
                         "Give a prompt with --prompt instead.")
    return text
