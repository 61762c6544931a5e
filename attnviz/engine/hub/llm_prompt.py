"""The prompt an LLM translates from: the instruction with the sentence in it, rendered by the folder's chat template
(with the generation prompt) or bare for a base model, tokenized, and the token span of the sentence found (what
plays the source's part in the views), without torch.

The default instruction is the one Tower's and EuroLLM's model cards show: ``Translate the following text from
German into English.\\nGerman: {text}\\nEnglish:``; ``--prompt`` replaces it with any text holding ``{text}``
(``{src_lang}`` and ``{tgt_lang}`` are the languages' English names). The prompt is exactly what the model reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from attnviz.engine.errors import InputError
from attnviz.engine.hub.llm_tokens import render
from attnviz.engine.text.tokenize import LANGUAGE_NAMES

if TYPE_CHECKING:
    from attnviz.engine.translator import Translator

DEFAULT_PROMPT = "Translate the following text from {src_lang} into {tgt_lang}.\n{src_lang}: {text}\n{tgt_lang}:"
FIELDS = ("text", "src_lang", "tgt_lang")
ROLES = ("template", "instruction", "source")  # outside the user's message, the message around the text, the text


def check_prompt(prompt: str) -> str:
    """A prompt template holding ``{text}`` once, and no field but ``{text}``, ``{src_lang}``, ``{tgt_lang}``, each
    plain (no format spec or conversion: ``{text:>9}`` would pad the sentence, ``{text!r}`` quote it)."""
    import string

    try:
        fields = [(name, spec, conversion) for _, name, spec, conversion in string.Formatter().parse(prompt)
                  if name is not None]
    except ValueError as exc:
        raise InputError(f"The prompt is not a valid template ({exc}); write fields as {{text}}, and braces as "
                         "{{ and }}.") from None
    names = [name for name, _, _ in fields]
    formatted = next((f"{{{name}{'!' + conversion if conversion else ''}{':' + spec if spec else ''}}}"
                      for name, spec, conversion in fields if spec or conversion), None)
    if formatted is not None:
        raise InputError(f"The prompt writes {formatted[:40]}: fields take no format spec or conversion; write "
                         "{text}, {src_lang} or {tgt_lang} as they are.")
    unknown = sorted(set(names) - set(FIELDS))
    if unknown:
        raise InputError(f"The prompt names {{{unknown[0][:30]}}}; it may use {{text}}, {{src_lang}} and "
                         "{tgt_lang} only.")
    if names.count("text") != 1:
        raise InputError("The prompt must hold {text} exactly once: where the sentence to translate goes.")
    return prompt


@dataclass(frozen=True)
class Prompt:
    """One sentence's prompt as the model reads it."""

    text: str  # the whole prompt, template included
    ids: tuple[int, ...]  # the folder's token ids
    tokens: tuple[str, ...]  # their labels (the tokenizer's strings; the translator's readable labels)
    roles: tuple[str, ...]  # per token, one of ROLES
    span: tuple[int, int]  # [first, last + 1) of the tokens that overlap the sentence


@runtime_checkable
class PromptReader(Protocol):
    """What a translator that reads its source inside a prompt (a decoder-only LLM's) offers beyond ``Translator``:
    the prompt built around a sentence, its tokenizer and chat template, and the forced reference's tokens."""

    tokenizer: Any
    template: Any
    prompt_template: str | None

    def prompt(self, text: str) -> Prompt: ...

    def model_limit(self) -> int: ...

    def reference_tokens(self, text: str) -> list[str]: ...

    def target_ids(self, text: str) -> list[int]: ...


def prompt_reader(translator: Translator) -> PromptReader:
    """``translator`` as the prompt reader it is (a decoder-only LLM's); an error for one that reads no prompt (a
    caller asks ``kind.reads_prompt`` first)."""
    if not isinstance(translator, PromptReader):
        raise TypeError(f"a {translator.kind.name} model reads no prompt")
    return translator


def build_prompt(text: str, prompt: str, src: str, tgt: str, template: Any, tokenizer: Any,
                 specials: dict[str, str]) -> Prompt:
    """``text`` in the instruction ``prompt`` between ``src`` and ``tgt`` (ISO codes), through the chat
    ``template`` when there is one; the sentence's token span and every token's role."""
    names = {"src_lang": LANGUAGE_NAMES.get(src, src), "tgt_lang": LANGUAGE_NAMES.get(tgt, tgt)}
    before, after = prompt.split("{text}")
    head, tail = before.format(**names), after.format(**names)
    message = head + text + tail
    whole = render(template, message, specials) if template is not None else message
    at = whole.rfind(message)
    if at < 0:
        raise InputError("The model's chat template changes the message it is given, so the sentence cannot be found "
                         "in the prompt; give a prompt with --prompt.")
    start, end = at + len(head), at + len(head) + len(text)
    encoding = tokenizer.encode(whole, add_special_tokens=template is None)
    roles, first, last = [], None, 0
    for i, (a, b) in enumerate(encoding.offsets):
        special = b <= a and encoding.special_tokens_mask[i]
        if not special and a < end and b > start:
            roles.append("source")
            first = i if first is None else first
            last = i + 1
        elif not special and a < at + len(message) and b > at:
            roles.append("instruction")
        else:
            roles.append("template")
    return Prompt(whole, tuple(encoding.ids), tuple(encoding.tokens), tuple(roles),
                  (first if first is not None else 0, last))
