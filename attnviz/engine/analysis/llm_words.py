"""A decoder-only LLM's sentence pairs for word alignment: the source read inside its prompt, the target forced.

An LLM has no cross-attention: each output step's one softmax runs over the whole prompt and the output so far. The
prompt's columns (what ``CausalLM.decode`` reports as ``cross_attention``) hold the template, the instruction and
the sentence; only the sentence's span (``Prompt.span``, the tokens that overlap the sentence's characters) is
aligned, each row renormalised over the span (``setwords.word_attention``), so template and instruction tokens
never take a link. The forced target is the reference tokenized by the model's own tokenizer, as
``Translator.reference_tokens`` does. Byte-level BPE pieces are grouped into the set's words by their character
offsets: the sentence is the set's words joined by single spaces, and a piece belongs to the word its characters
overlap (a piece of spaces alone, to the word after it); a piece whose characters come from two words or more
belongs to the first and is reported (``TokenReport.spanning``). Names: as ``setwords``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from attnviz.engine.analysis.corpus import Example
from attnviz.engine.analysis.llm_heads import prompt_card
from attnviz.engine.analysis.setwords import TokenReport, WordTokens
from attnviz.engine.errors import InputError
from attnviz.engine.hub.llm_prompt import DEFAULT_PROMPT, prompt_reader
from attnviz.engine.models.llm_arch import LLMArch
from attnviz.engine.text.vocab import EOS_ID, SOS_ID

if TYPE_CHECKING:
    from attnviz.engine.translator import Translator

SPAN_NOTE = ("the prompt columns of the sentence's span (template and instruction tokens left out), each output "
             "row renormalised over the span")

WINDOW_NOTE = ("a head of a sliding-window layer sees only the keys within its window: span tokens farther back "
               "take no weight from it, and a row that reaches no span token links nothing")


def word_ranges(words: Sequence[str]) -> list[tuple[int, int]]:
    """Character ranges [start, end) of ``words`` in ``" ".join(words)``."""
    out, at = [], 0
    for word in words:
        out.append((at, at + len(word)))
        at += len(word) + 1
    return out


def pieces_to_words(offsets: Sequence[tuple[int, int]], ranges: Sequence[tuple[int, int]]
                    ) -> tuple[list[int], list[list[int]]]:
    """Per piece (character offsets in the sentence), the word it belongs to, and the words each piece covers."""
    word_of, covered = [], []
    for a, b in offsets:
        hit = [w for w, (s, e) in enumerate(ranges) if a < e and b > s]
        if not hit:  # spaces alone: the word after them (or the last)
            hit = [next((w for w, (s, _) in enumerate(ranges) if s >= b), len(ranges) - 1)]
        word_of.append(hit[0])
        covered.append(hit)
    return word_of, covered


def _report(report: TokenReport, number: int, side: str, words: Sequence[str], tokens: WordTokens,
            covered: Sequence[Sequence[int]]) -> None:
    report.words += len(words)
    counts = np.bincount(np.asarray(tokens.word_of, dtype=int), minlength=len(words))
    report.split_words += int((counts > 1).sum())
    report.unread += [f"line {number}: {side} word {i + 1} {words[i]!r}" for i in tokens.unread()]
    report.spanning += [f"line {number}: {side} {token} <- {' '.join(words[w] for w in hit)}"
                        for token, hit in zip(tokens.tokens, covered, strict=True) if len(hit) > 1]


def _source(translator: Translator, number: int, words: Sequence[str]
            ) -> tuple[tuple[int, ...], tuple[int, int], list[int], list[list[int]], str]:
    """The prompt's ids (attnviz's), the sentence's span, its pieces' words and the prompt's text."""
    text, reader = " ".join(words), prompt_reader(translator)
    found = reader.prompt(text)
    limit = reader.model_limit()
    if len(found.ids) > limit:
        raise InputError(f"sentence {number}: its prompt is {len(found.ids):,} tokens long, more than the {limit:,} "
                         "this model reads at once (its positions); split the pair into shorter ones, or leave it out")
    first, last = found.span
    if last >= len(found.ids):
        raise InputError("The prompt ends with the sentence, so its last token is the first output step's input, "
                         "not a column of attention; give a prompt with text after {text} (--prompt).")
    encoding = reader.tokenizer.encode(found.text, add_special_tokens=reader.template is None)
    offsets = encoding.offsets[first:last]
    start = offsets[0][0] + found.text[offsets[0][0]:offsets[-1][1]].find(text)
    word_of, covered = pieces_to_words([(a - start, b - start) for a, b in offsets], word_ranges(words))
    return tuple(translator.src_vocab.encode(list(found.tokens))), (first, last), word_of, covered, found.text


def llm_examples(translator: Translator, sources: Sequence[Sequence[str]], targets: Sequence[Sequence[str]],
                 report: TokenReport | None) -> tuple[list[tuple[Example, WordTokens, WordTokens, int]],
                                                      list[tuple[int, int]], list[str]]:
    """Each pair as the prompt's ids and the forced reference, with token -> word maps and the span's first column
    (what ``alignment`` reads of an encoder-decoder), each prompt's span [first, last) and each prompt's text."""
    out, spans, prompts, reader = [], [], [], prompt_reader(translator)
    for number, (src_words, tgt_words) in enumerate(zip(sources, targets, strict=True), 1):
        if not src_words:
            raise InputError(f"sentence {number}: the source gives the model no token to read")
        ids, span, src_of, src_cover, prompt = _source(translator, number, src_words)
        src = WordTokens(tuple(translator.src_vocab.token(i) for i in ids[span[0]:span[1]]), tuple(src_of),
                         len(src_words))
        tgt_text = " ".join(tgt_words)
        encoding = reader.tokenizer.encode(tgt_text, add_special_tokens=False)
        tgt_of, tgt_cover = pieces_to_words(encoding.offsets, word_ranges(tgt_words))
        limit = translator.model.max_target_len - 2
        if len(encoding.ids) > limit:
            raise InputError(f"sentence {number}: the target is {len(encoding.ids):,} tokens long, more than the "
                             f"{limit:,} this model writes at once; split the pair into shorter ones, or leave it out")
        tgt = WordTokens(tuple(reader.reference_tokens(tgt_text)), tuple(tgt_of), len(tgt_words))
        if report is not None:
            _report(report, number, "source", src_words, src, src_cover)
            _report(report, number, "target", tgt_words, tgt, tgt_cover)
        forced = (SOS_ID, *reader.target_ids(tgt_text), EOS_ID)
        out.append((Example(ids, forced), tgt, src, span[0]))
        spans.append(span)
        prompts.append(prompt)
    return out, spans, prompts


def prompt_settings(translator: Translator, sources: Sequence[Sequence[str]],
                    reverse: Translator | None = None) -> dict[str, Any]:
    """What reproduces an LLM's alignment (nothing for an encoder-decoder): the instruction, the languages it names,
    what is aligned (``SPAN_NOTE``), each sentence's span in its prompt and the first prompt as read; with a
    ``reverse`` LLM, its instruction and languages."""
    if not translator.kind.reads_prompt:
        return {}
    out: dict[str, Any] = {"attention": SPAN_NOTE, **prompt_card(translator, [" ".join(w) for w in sources])}
    arch = LLMArch.from_dict(translator.config.arch)
    windowed = [layer + 1 for layer in range(translator.config.dec_layers) if arch.sliding(layer)]
    if windowed:  # a step of these layers sees only its last keys: a span farther back gets no weight, no link
        out.update(windowed_layers=windowed, window=arch.sliding_window, window_note=WINDOW_NOTE)
    if reverse is not None and reverse.kind.reads_prompt:
        out["reverse_prompt"] = prompt_reader(reverse).prompt_template
        out["reverse_prompt_languages"] = [reverse.src_spec.lang, reverse.tgt_spec.lang]
    return out


def prompted_the_other_way(translator: Translator):
    """The same LLM prompted in the other direction (its prompt's languages swapped), the reverse model of a
    symmetrised alignment; refused (InputError) where the instruction names no language, since it would be the same
    prompt, or for a model that reads no prompt."""

    if not translator.kind.reads_prompt:
        raise InputError("--reverse-prompted reads the same LLM prompted the other way; this model reads no prompt: "
                         "give a model of the other direction with --reverse-model")
    template = prompt_reader(translator).prompt_template or DEFAULT_PROMPT
    if "{src_lang}" not in template and "{tgt_lang}" not in template:
        raise InputError("The prompt names no language ({src_lang} or {tgt_lang}), so prompting the model the other "
                         "way would be the same prompt: no reverse alignment is possible; give a prompt that names "
                         "them (--prompt), or align one way only")
    return translator.choosing(translator.tgt_spec.lang, translator.src_spec.lang)  # the same network, other specs
