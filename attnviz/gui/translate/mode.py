"""The Translate tab's words in its two modes: translating a sentence, or (a language model) generating from a
prefix. Set on every model change; kept apart so the tab's module holds its behaviour."""

from __future__ import annotations


def apply_mode_texts(tab, generating: bool, language: str, loaded: bool) -> None:
    tab.lang_label.setText("Prefi&x:" if generating else f"{language or 'Source'} &sentence:")
    tab.source_edit.setPlaceholderText(
        "Loading model..." if not loaded else
        "Type the first characters (or nothing) and press Enter" if generating else
        f"Type a {language} sentence and press Enter")
    tab.source_edit.setAccessibleName("Prefix to continue" if generating else "Sentence to translate")
    tab.translate_button.setText("Gener&ate" if generating else "Tr&anslate")
    tab.translate_button.setToolTip("Generate from the prefix (Enter)" if generating else
                                    "Translate the sentence (Enter)")
    tab.output_title.setText("<b>Generated</b>" if generating else "<b>Translation</b>")
    tab.output_view.set_placeholder("Generated characters appear here, one by one" if generating else
                                    "The translation appears here, token by token")
    tab.translation_text.set_placeholder("The generated text, to select or copy" if generating else
                                         "The translation as text, to select or copy")
    tab.attention.heatmap.placeholder = ("Generate to see the model's attention" if generating else
                                         "Translate a sentence to see its attention")
    tab.topk_view.placeholder = ("The likeliest next characters appear here" if generating else
                                 "The likeliest next tokens appear here")
