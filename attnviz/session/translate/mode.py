"""The Translate tab's words in its two modes: translating a sentence, or (a language model) generating from a
prefix. Plain data, chosen on every model change; the tab puts them on its widgets (``TranslateTab._show_mode``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModeTexts:
    """Every text of the Translate tab that depends on the mode."""

    source_label: str
    placeholder: str
    source_name: str  # what a screen reader calls the input
    button: str
    button_tip: str
    output_title: str
    output_placeholder: str
    text_placeholder: str
    heatmap_placeholder: str
    topk_placeholder: str


def mode_texts(generating: bool, language: str, loaded: bool) -> ModeTexts:
    """The texts for a language model (``generating``) or a translation model from ``language``."""
    if generating:
        return ModeTexts("&Start with:", "Type the first characters (or nothing) and press Enter" if loaded else
                         "Loading model...", "Prefix to continue", "Gener&ate", "Generate from the prefix (Enter)",
                         "Generated", "Generated characters appear here, one by one",
                         "The generated text, to select or copy", "Generate to see the model's attention",
                         "The likeliest next characters appear here")
    typed = f"{language} sentence" if language else "sentence"
    return ModeTexts(f"{language or 'Source'} &sentence:", f"Type a {typed} and press Enter" if loaded else
                     "Loading model...", "Sentence to translate", "Tr&anslate", "Translate the sentence (Enter)",
                     "Translation", "The translation appears here, token by token",
                     "The translation as text, to select or copy", "Translate a sentence to see its attention",
                     "The likeliest next tokens appear here")
