"""A GGUF file's tokenizer, built from its metadata as a ``tokenizers.Tokenizer``, the way transformers builds it
from the same file, so both read a prompt into the same ids.

``tokenizer.ggml.model`` says which: ``gpt2`` is byte-level BPE (the file's merges; the split pattern of its
``tokenizer.ggml.pre`` where transformers knows one, GPT-2's otherwise), ``llama`` SentencePiece-style BPE with byte
fallback (merges from the file, or rebuilt from the vocabulary by score; Gemma's by the tokens' order, its spaces
spelled as ``\u2581``, split at spaces). Tokens the file marks as control become special tokens, user-defined ones
added tokens; BOS is added when ``tokenizer.ggml.add_bos_token`` says so (SentencePiece's default: yes).
"""

from __future__ import annotations

from typing import Any

from attnviz.engine.errors import CheckpointError
from attnviz.engine.hub.gguf_format import AGAIN_GGUF, GGUFFile
from attnviz.engine.hub.llm_tokens import byte_alphabet

CONTROL, USER_DEFINED = 3, 4  # llama.cpp's token types
LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
               r"|\s+(?!\S)|\s+")
SPLITS = {"llama3": LLAMA3_SPLIT, "llama-v3": LLAMA3_SPLIT, "llama-bpe": LLAMA3_SPLIT, "smaug-bpe": LLAMA3_SPLIT,
          "qwen2": QWEN2_SPLIT, "deepseek-r1-qwen": QWEN2_SPLIT}
MODELS = ("gpt2", "llama")


def _merge_pairs(found: GGUFFile) -> list[tuple[str, str]]:
    """The file's merges, each two tokens joined by a space."""
    pairs = [m.split(" ") for m in _strings(found, "tokenizer.ggml.merges")]
    if not all(len(p) == 2 for p in pairs):
        raise CheckpointError(f"{found.path}: a merge of its tokenizer is not two tokens; {AGAIN_GGUF}.")
    return [(a, b) for a, b in pairs]


def _strings(found: GGUFFile, key: str) -> list[str]:
    value = found.metadata.get(key)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise CheckpointError(f"{found.path}: its tokenizer lacks {key} (a list of strings); {AGAIN_GGUF}.")
    return value


def _merges_from(vocab: dict[str, int], scores: dict[str, float]) -> list[tuple[str, str]]:
    """The merges a SentencePiece vocabulary implies (transformers' ``generate_merges``): every split of a token into
    two tokens, ranked by the token's score, best first."""
    merges = []
    for token, score in scores.items():
        local = [(token[:i], token[i:], score) for i in range(1, len(token))
                 if token[:i] in vocab and token[i:] in vocab]
        merges += sorted(local, key=lambda m: (vocab[m[0]], vocab[m[1]]))
    merges.sort(key=lambda m: (m[2], len(m[0]), len(m[1])), reverse=True)
    return [(a, b) for a, b, _ in merges]


def _byte_level(found: GGUFFile, tokens: list[str]) -> Any:
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

    spelling = {b: c for c, b in byte_alphabet().items()}  # GPT-2's printable spelling of each byte
    alphabet = set(spelling.values())
    vocab = {t if set(t) <= alphabet else "".join(spelling[b] for b in t.encode("utf-8")): i
             for i, t in enumerate(tokens)}
    merges = _merge_pairs(found)
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges, continuing_subword_prefix="", end_of_word_suffix="",
                                     fuse_unk=False))
    split = SPLITS.get(str(found.metadata.get("tokenizer.ggml.pre")))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False) if split is None else \
        pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(split), behavior="isolated"),
                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tokenizer.decoder = decoders.ByteLevel()
    return tokenizer, alphabet


def _sentencepiece(found: GGUFFile, tokens: list[str], gemma: bool) -> Any:
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers

    if gemma:  # a token of spaces alone is stored as spaces; Gemma's merges follow the tokens' order
        tokens = ["\u2581" * len(t) if " " in t and not t.strip() else t for t in tokens]
    vocab = {t: i for i, t in enumerate(tokens)}
    if "tokenizer.ggml.merges" in found.metadata:
        merges = _merge_pairs(found)
    else:
        scores = found.metadata.get("tokenizer.ggml.scores")
        if gemma:
            ranks = {t: -float(i) for i, t in enumerate(tokens)}
        elif scores is not None and len(scores) == len(tokens):
            ranks = {t: float(s) for t, s in zip(tokens, scores)}
        else:
            raise CheckpointError(f"{found.path}: its tokenizer has neither merges nor one score a token; "
                                  f"{AGAIN_GGUF}.")
        merges = _merges_from(vocab, ranks)
    unk = found.metadata.get("tokenizer.ggml.unknown_token_id")
    unk_token = tokens[unk] if isinstance(unk, int) and 0 <= unk < len(tokens) else None
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=True, byte_fallback=True,
                                     unk_token=unk_token))
    if gemma:
        tokenizer.normalizer = normalizers.Replace(" ", "\u2581")
        tokenizer.pre_tokenizer = pre_tokenizers.Split(pattern=" ", behavior="merged_with_previous", invert=False)
        tokenizer.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(),
                                               decoders.Fuse()])
    else:
        prefix = found.metadata.get("tokenizer.ggml.add_space_prefix", True) is not False
        tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581",
                                                           prepend_scheme="first" if prefix else "never",
                                                           split=False)
        tokenizer.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(),
                                               decoders.Fuse(), *([decoders.Strip(content=" ", left=1)]
                                                                  if prefix else [])])
    return tokenizer


def _specials(tokenizer: Any, found: GGUFFile, tokens: list[str], alphabet: set[str] | None) -> None:
    """Control tokens as special tokens (a byte-level vocabulary's only when spelled in its byte alphabet),
    user-defined ones as added tokens, each kept whole in the text."""
    from tokenizers import AddedToken

    types = found.metadata.get("tokenizer.ggml.token_type")
    if types is None:
        return
    if len(types) != len(tokens):
        raise CheckpointError(f"{found.path}: its tokenizer has {len(types):,} token types for {len(tokens):,} "
                              f"tokens; {AGAIN_GGUF}.")
    control = [AddedToken(t, normalized=False, special=True) for t, kind in zip(tokens, types.tolist())
               if kind == CONTROL and (alphabet is None or set(t) <= alphabet)]
    if control:
        tokenizer.add_special_tokens(control)
    vocab = tokenizer.get_vocab()
    added = [AddedToken(t, normalized=False, special=False) for t, kind in zip(tokens, types.tolist())
             if kind == USER_DEFINED and t in vocab]
    if added:
        tokenizer.add_tokens(added)


def _post_processor(tokenizer: Any, found: GGUFFile, tokens: list[str], default_bos: bool) -> None:
    """BOS before a text read with its special tokens, when the file says so."""
    from tokenizers import processors

    bos = found.metadata.get("tokenizer.ggml.bos_token_id")
    if found.metadata.get("tokenizer.ggml.add_bos_token", default_bos) is True and isinstance(bos, int) \
            and 0 <= bos < len(tokens):
        tokenizer.post_processor = processors.TemplateProcessing(
            single=f"{tokens[bos]}:0 $A:0", pair=f"{tokens[bos]}:0 $A:0 {tokens[bos]}:1 $B:1",
            special_tokens=[(tokens[bos], bos)])


def gguf_tokenizer(found: GGUFFile, arch: str) -> Any:
    """The ``tokenizers.Tokenizer`` the file describes (CheckpointError naming what is missing or unknown)."""
    kind = found.metadata.get("tokenizer.ggml.model")
    if kind not in MODELS:
        raise CheckpointError(f"{found.path}: its tokenizer is {kind!r:.40} (tokenizer.ggml.model); attnviz reads "
                              f"{' and '.join(MODELS)} tokenizers from GGUF files.")
    tokens = _strings(found, "tokenizer.ggml.tokens")
    if kind == "gpt2":
        tokenizer, alphabet = _byte_level(found, tokens)
    else:
        tokenizer, alphabet = _sentencepiece(found, tokens, arch.startswith("gemma")), None
    _specials(tokenizer, found, tokens, alphabet)
    _post_processor(tokenizer, found, tokens, default_bos=kind == "llama")
    return tokenizer


def gguf_specials(found: GGUFFile) -> dict[str, str]:
    """The text of BOS/EOS/PAD/UNK as the chat template names them (``bos_token``...)."""
    tokens = found.metadata.get("tokenizer.ggml.tokens") or []
    out = {}
    for name, key in (("bos_token", "bos_token_id"), ("eos_token", "eos_token_id"), ("pad_token", "padding_token_id"),
                      ("unk_token", "unknown_token_id")):
        index = found.metadata.get(f"tokenizer.ggml.{key}")
        if isinstance(index, int) and 0 <= index < len(tokens):
            out[name] = tokens[index]
    return out
