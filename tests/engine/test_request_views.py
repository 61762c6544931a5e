"""Requests carry their settings: a multilingual model's languages and an LLM's prompt are chosen on a view of the
translator (``Translator.choosing``), never on the translator a decode is running on. Decodes race changes of
language and prompt made meanwhile in another thread, and each gives what it gives alone."""

from __future__ import annotations

import threading

import pytest

from attnviz.engine.config import DecodeConfig
from attnviz.engine.errors import InputError
from attnviz.engine.loading import load_translator
from tests.folder_samples import write_fairseq_folder
from tests.llm_folder import make_llm_folder

SENTENCE = "ein hund läuft"
DECODE = DecodeConfig(max_len=5)


def _race(translator, choose, rounds: int = 40) -> list[tuple[str, ...]]:
    """Decode ``translator`` ``rounds`` times in a thread while the main thread keeps making views (``choose``)."""
    found: list[tuple[str, ...]] = []
    first_view, done = threading.Event(), threading.Event()

    def decode() -> None:
        try:
            assert first_view.wait(30)  # the decodes start once views are being made, whatever the machine's speed
            for _ in range(rounds):
                found.append(tuple(translator.translate(SENTENCE, DECODE).tokens))
        finally:
            done.set()

    thread = threading.Thread(target=decode)
    thread.start()
    views = 0
    while not done.is_set():
        choose(views)
        views += 1
        first_view.set()
    thread.join()
    assert views >= 1 and len(found) == rounds  # views were made while the decodes ran, and every decode ended
    return found


def test_a_language_chosen_while_decoding_never_reaches_the_decode(tmp_path):
    translator = load_translator(write_fairseq_folder(tmp_path / "nllb", "nllb"))
    alone = tuple(translator.translate(SENTENCE, DECODE).tokens)
    pairs = [("fra_Latn", "deu_Latn"), ("deu_Latn", "fra_Latn")]
    seen = _race(translator, lambda i: translator.choosing(*pairs[i % 2]))
    assert set(seen) == {alone} and alone[0] == "eng_Latn"
    assert (translator.languages.src, translator.languages.tgt) == (None, "eng_Latn")  # untouched
    french = translator.choosing(tgt="fra_Latn")
    assert french.translate(SENTENCE, DECODE).tokens[0] == "fra_Latn" and french.model is translator.model
    assert french.metadata["languages"]["tgt"] == "fra_Latn" != translator.metadata["languages"]["tgt"]


def test_a_prompt_chosen_while_decoding_never_reaches_the_decode(tmp_path):
    pytest.importorskip("transformers")
    translator = load_translator(make_llm_folder(tmp_path, "qwen2"), "float32")
    alone = translator.translate(SENTENCE, DECODE)
    prompts = ["{src_lang}: {text}\n{tgt_lang}:", "Say in {tgt_lang}: {text}"]
    seen = _race(translator, lambda i: translator.choosing(prompt=prompts[i % 2]), rounds=20)
    assert set(seen) == {tuple(alone.tokens)}
    view = translator.choosing(prompt=prompts[0])
    assert view.prompt_template == prompts[0] != translator.prompt_template
    assert view.translate(SENTENCE, DECODE).src_tokens != alone.src_tokens  # the view reads its own prompt


def test_a_refused_choice_makes_no_view_and_changes_nothing(tmp_path):
    translator = load_translator(write_fairseq_folder(tmp_path / "nllb", "nllb"))
    with pytest.raises(InputError, match="xx_Latn"):
        translator.choosing(tgt="xx_Latn")
    assert translator.languages.tgt == "eng_Latn"
