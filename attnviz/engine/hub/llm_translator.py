"""The ``Translator`` over a decoder-only LLM (``LLMTranslator``), whatever it was read from (a folder,
``engine.hub.llm_weights``; a converted checkpoint): it puts the sentence into the prompt (``engine.hub.llm_prompt``),
reads the prompt's tokens as the source and decodes the answer with the model's own tokenizer; everything else
(step-by-step decoding, beam search, what-if prefixes, heads off, batches) is the Translator's, over a network that
reads the prompt's last token as its first input.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from attnviz.engine.checkpoints.header import TOKENIZER_PREFIX
from attnviz.engine.errors import InputError
from attnviz.engine.hub.llm_prompt import DEFAULT_PROMPT, Prompt, build_prompt, check_prompt
from attnviz.engine.hub.llm_tokens import compile_template, token_labels
from attnviz.engine.models.causal_lm import SPECIALS
from attnviz.engine.models.protocol import IncrementalModel
from attnviz.engine.search.greedy import DecodeInput
from attnviz.engine.text.tokenize import LANGUAGE_NAMES, TokenizerSpec
from attnviz.engine.text.vocab import SPECIALS as SPECIAL_TOKENS
from attnviz.engine.text.vocab import Vocab
from attnviz.engine.translator import Translator

TOKENIZER_TENSOR = f"{TOKENIZER_PREFIX}json"  # tokenizer.json's bytes in a converted LLM's checkpoint


class LLMVocab(Vocab):
    """attnviz's 4 specials, then the folder's tokens by id, as ``token_labels`` shows them (``▁the``,
    ``<|im_end|>``); a label the folder shares with attnviz's specials (Gemma's ``<eos>``) keeps its own id."""

    def __init__(self, tokens: Sequence[str]):
        self._itos = [*SPECIAL_TOKENS, *tokens]
        self._stoi = {tok: i for i, tok in enumerate(self._itos)}


class PromptTranslator:
    """Mixed into ``Translator`` by ``LLMTranslator``: what differs for a model that reads a prompt."""

    tokenizer: Any
    template: Any
    template_source: str | None
    specials: dict[str, str]
    prompt_template: str | None
    src_spec: TokenizerSpec
    tgt_spec: TokenizerSpec
    tgt_vocab: Vocab
    metadata: dict[str, Any]

    def set_prompt(self, prompt: str | None) -> None:
        """The instruction each sentence is put into (``DEFAULT_PROMPT`` for None); InputError for a bad one."""
        self.prompt_template = DEFAULT_PROMPT if prompt is None else check_prompt(prompt)
        self.metadata["prompt"] = self.prompt_template

    def use_prompt(self, prompt: str | None) -> None:
        """``prompt`` replaces the instruction (None keeps it)."""
        if prompt is not None:
            self.set_prompt(prompt)

    def use_languages(self, src: str | None = None, tgt: str | None = None) -> None:
        """The languages the instruction names (an LLM translates any pair it knows; attnviz names de, fr, en)."""
        for code in (src, tgt):
            if code is not None and code not in LANGUAGE_NAMES:
                raise InputError(f"Language {code!r:.20} is not one attnviz names in a prompt; choose one of "
                                 f"{', '.join(LANGUAGE_NAMES)}, or write the languages into --prompt.")
        if src is not None:
            self.src_spec = dataclasses.replace(self.src_spec, lang=src)
        if tgt is not None:
            self.tgt_spec = dataclasses.replace(self.tgt_spec, lang=tgt)

    def prompt(self, text: str) -> Prompt:
        """``text``'s prompt, exactly as the model reads it, with the sentence's span and each token's role."""
        if not text.strip():
            raise InputError("Nothing to translate: the sentence is empty. Type a sentence in "
                             f"{LANGUAGE_NAMES.get(self.src_spec.lang, self.src_spec.lang)}.")
        found = build_prompt(text, self.prompt_template or DEFAULT_PROMPT, self.src_spec.lang, self.tgt_spec.lang,
                             self.template, self.tokenizer, self.specials)
        return dataclasses.replace(found, tokens=tuple(self.tgt_vocab.token(i + SPECIALS) for i in found.ids))

    def prepare_source(self, text: str) -> tuple[list[str], list[int], list[str]]:
        found = self._checked_prompt(text)
        return list(found.tokens), [i + SPECIALS for i in found.ids], []

    def prepare(self, text: str, forced: Sequence[int] | None = None) -> DecodeInput:
        """The prompt as the source, its last token kept back as the first decoder input (its label and role
        too), each token's role beside it."""
        found = self._checked_prompt(text)
        return DecodeInput([i + SPECIALS for i in found.ids], found.tokens[:-1], tuple(forced or ()), (),
                           found.roles[:-1])

    def _checked_prompt(self, text: str) -> Prompt:
        if not isinstance(text, str):
            raise InputError(f"The sentence must be text (str), not {type(text).__name__}.")
        found = self.prompt(text)
        limit = self.model_limit()
        if len(found.ids) > limit:
            raise InputError(f"The prompt has {len(found.ids):,} tokens but the model reads at most {limit:,} here; "
                             "translate a shorter text.")
        return found

    def model_limit(self) -> int:
        model: IncrementalModel = self.model  # type: ignore[attr-defined]  # the Translator's
        return model.max_source_len - 1

    def source_ids(self, src_tokens: Sequence[str]) -> list[int]:
        """The prompt shown as ``src_tokens`` and its last token, kept back from the shown source as the first
        decoder input: the instruction's end, the same whatever the sentence (``check_prompt``)."""
        return [self.tgt_vocab.id(t) for t in src_tokens] + [self.prompt("x").ids[-1] + SPECIALS]

    def reference_tokens(self, text: str) -> list[str]:
        return [self.tgt_vocab.token(i + SPECIALS) for i in self.tokenizer.encode(text, add_special_tokens=False).ids]

    def target_ids(self, text: str) -> list[int]:
        ids = self.tokenizer.encode(text, add_special_tokens=False).ids
        return [i + SPECIALS for i in ids]

    def detokenize(self, tokens: Sequence[str]) -> str:
        ids = [self.tgt_vocab.id(t) - SPECIALS for t in tokens if self.tgt_vocab.id(t) >= SPECIALS]
        return str(self.tokenizer.decode(ids, skip_special_tokens=True))

    def checkpoint_parts(self, **extra: Any) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        """The Translator's parts plus what a prompt needs: ``tokenizer.json`` as a uint8 tensor, the chat
        template's source, the special tokens' text and the instruction."""
        state, meta = Translator.checkpoint_parts(self, **extra)  # type: ignore[arg-type]  # mixed into one
        raw = self.tokenizer.to_str().encode("utf-8")
        state[TOKENIZER_TENSOR] = torch.frombuffer(bytearray(raw), dtype=torch.uint8)
        meta.update(chat_template=self.template_source, special_tokens=self.specials, prompt=self.prompt_template)
        return state, meta


class LLMTranslator(PromptTranslator, Translator):
    """A ``Translator`` over a decoder-only LLM folder."""

    def __init__(self, model: IncrementalModel, tokenizer: Any, template_source: str | None,
                 specials: dict[str, str], meta: dict[str, Any], where: Path | str = "the model"):
        vocab = LLMVocab(token_labels(tokenizer, model.cfg.tgt_vocab_size - SPECIALS))
        super().__init__(model, vocab, vocab, TokenizerSpec("de", mode="whitespace", lowercase=False),
                         TokenizerSpec("en", mode="whitespace", lowercase=False), meta)
        self.tokenizer, self.specials = tokenizer, specials
        self.template_source = template_source
        self.template = None if template_source is None else compile_template(where, template_source)
        self.set_prompt(meta.get("prompt"))
