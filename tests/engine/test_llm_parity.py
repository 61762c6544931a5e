"""Decoder-only LLM folders of every family against transformers (eager attention, the test-only extra): the same
logits and attention tensors, the same greedy and beam outputs as ``generate``, the same rendered prompt as
``apply_chat_template`` and the same text as ``decode``; a sharded folder read as one."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnviz.engine.config import DecodeConfig
from attnviz.engine.events import DecodeStep
from attnviz.engine.loading import load_translator
from attnviz.engine.models.causal_lm import SPECIALS
from attnviz.engine.text.vocab import SOS_ID
from tests.llm_folder import FAMILIES, make_llm_folder

transformers = pytest.importorskip("transformers")
SENTENCE = "Der Mann sieht den Hund über die Straße laufen."


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def pair(request, tmp_path_factory):
    folder = make_llm_folder(tmp_path_factory.mktemp(request.param), request.param)
    reference = transformers.AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    return request.param, load_translator(folder, "float32"), reference, tokenizer


def prompt_ids(tokenizer, text: str) -> list[int]:
    message = f"Translate the following text from German into English.\nGerman: {text}\nEnglish:"
    rendered = tokenizer.apply_chat_template([{"role": "user", "content": message}], tokenize=False,
                                             add_generation_prompt=True)
    return tokenizer(rendered, add_special_tokens=False)["input_ids"]


def test_the_prompt_is_the_one_apply_chat_template_renders(pair):
    _, ours, _, tokenizer = pair
    message = f"Translate the following text from German into English.\nGerman: {SENTENCE}\nEnglish:"
    expected = tokenizer.apply_chat_template([{"role": "user", "content": message}], tokenize=False,
                                             add_generation_prompt=True)
    prompt = ours.prompt(SENTENCE)
    assert prompt.text == expected and list(prompt.ids) == prompt_ids(tokenizer, SENTENCE)
    a, b = prompt.span
    assert tokenizer.decode(list(prompt.ids[a:b])).strip() == SENTENCE  # the span is the sentence's tokens
    assert set(prompt.roles[:a]) >= {"template", "instruction"} and set(prompt.roles[a:b]) == {"source"}
    t = ours.translate(SENTENCE, DecodeConfig(max_len=3))
    assert t.src_tokens == prompt.tokens[:-1] and t.roles == prompt.roles[:-1]  # the last token is the first input
    assert "".join(t.src_tokens[a:b]).replace("\u2581", " ").strip() == SENTENCE  # readable labels


def test_logits_and_every_attention_tensor_equal_transformers(pair):
    _, ours, reference, tokenizer = pair
    ids = prompt_ids(tokenizer, SENTENCE)
    answer = [7, 19, 33, 5]  # any continuation: forced
    with torch.no_grad():
        out = reference(torch.tensor([ids + answer]), output_attentions=True)
        enc = ours.model.encode(torch.tensor([[i + SPECIALS for i in ids]]), need_weights=True)
        tgt = torch.tensor([[SOS_ID, *(i + SPECIALS for i in answer)]])
        dec = ours.model.decode(tgt, enc, need_weights=True)
        logits = ours.model.project(dec.hidden)[0, :, SPECIALS:]
    p = len(ids) - 1
    ends = list(ours.model.arch.end_ids)
    keep = torch.ones(logits.size(-1), dtype=torch.bool)
    keep[ends] = False  # folded into <eos>
    torch.testing.assert_close(logits[:, keep], out.logits[0, p:, keep], atol=1e-5, rtol=0)
    torch.testing.assert_close(ours.model.project(dec.hidden)[0, :, 3], out.logits[0, p:, ends].amax(-1), atol=1e-5,
                               rtol=0)
    for layer, theirs in enumerate(out.attentions):
        whole = torch.cat([dec.cross_attention[layer], dec.self_attention[layer]], -1)
        torch.testing.assert_close(whole, theirs[:, :, p:], atol=1e-5, rtol=0)
        torch.testing.assert_close(enc.attention[layer], theirs[:, :, :p, :p], atol=1e-5, rtol=0)


def test_cached_steps_equal_the_full_pass(pair):
    _, ours, _, _ = pair
    decode = DecodeConfig(max_len=8)
    cached = [e for e in ours.steps(SENTENCE, decode) if isinstance(e, DecodeStep)]
    full = [e for e in ours.steps(SENTENCE, decode, recompute=True) if isinstance(e, DecodeStep)]
    assert [s.token_id for s in cached] == [s.token_id for s in full] and len(cached) >= 2
    for a, b in zip(cached, full, strict=True):
        assert a.cross_attention.dtype == np.float16  # an LLM's maps are kept at half the memory
        np.testing.assert_allclose(a.cross_attention, b.cross_attention, atol=2e-3)
        np.testing.assert_allclose(a.self_attention, b.self_attention, atol=2e-3)
        total = a.cross_attention.sum(-1, dtype=np.float64) + a.self_attention.sum(-1, dtype=np.float64)
        np.testing.assert_allclose(total, 1.0, atol=5e-3)


def _generated(reference, tokenizer, ids: list[int], beams: int) -> list[int]:
    with torch.no_grad():
        out = reference.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                                 do_sample=False, num_beams=beams, max_new_tokens=10, length_penalty=1.0,
                                 early_stopping=True if beams > 1 else False)
    new = out[0, len(ids):].tolist()
    ends = set(reference.generation_config.eos_token_id)
    cut = next((i for i, t in enumerate(new) if t in ends), len(new))
    return new[:cut]


def test_greedy_tokens_and_text_are_generates_and_decodes(pair):
    _, ours, reference, tokenizer = pair
    expected = _generated(reference, tokenizer, prompt_ids(tokenizer, SENTENCE), 1)
    t = ours.translate(SENTENCE, DecodeConfig(max_len=10))
    assert [ours.tgt_vocab.id(tok) - SPECIALS for tok in t.words] == expected
    assert t.text == tokenizer.decode(expected, skip_special_tokens=True)


def test_beam_search_is_generates(pair):
    _, ours, reference, tokenizer = pair
    expected = _generated(reference, tokenizer, prompt_ids(tokenizer, SENTENCE), 4)
    decode = DecodeConfig(max_len=10, beam=4, length_rule="power", early_stopping="true")
    got = ours.translate_batch_tokens([SENTENCE], decode)[0]
    assert [ours.tgt_vocab.id(tok) - SPECIALS for tok in got] == expected


def test_a_padded_batch_translates_as_each_sentence_alone(pair):
    _, ours, _, _ = pair
    texts = [SENTENCE, "Ein Hund.", "Die Katze läuft schnell über das rote Haus."]
    decode = DecodeConfig(max_len=8)
    assert ours.translate_batch(texts, decode) == [ours.translate(t, decode).text for t in texts]


def test_a_sharded_folder_is_read_as_one(tmp_path):
    single = load_translator(make_llm_folder(tmp_path / "one", "qwen2"), "float32")
    folder = make_llm_folder(tmp_path / "many", "qwen2", shards=True)
    assert (folder / "model.safetensors.index.json").exists() and len(list(folder.glob("model-*"))) > 1
    sharded = load_translator(folder, "float32")
    assert sharded.translate(SENTENCE, DecodeConfig(max_len=6)).tokens == \
        single.translate(SENTENCE, DecodeConfig(max_len=6)).tokens


def test_a_head_off_in_any_view_is_off_for_the_whole_pass(pair):
    from attnviz.engine.heads import HeadRef

    _, ours, _, _ = pair
    decode = DecodeConfig(max_len=4)
    off = [DecodeConfig(max_len=4, heads_off=(HeadRef(kind, 1, 2),)) for kind in ("cross", "decoder", "encoder")]
    runs = [ours.translate(SENTENCE, d) for d in off]
    for run in runs:
        assert np.all(run.attention["cross"][1, 2] == 0) and np.all(run.attention["decoder"][1, 2] == 0)
        assert np.all(run.attention["encoder"][1, 2] == 0)
        np.testing.assert_array_equal(run.attention["cross"], runs[0].attention["cross"])
    assert not np.all(ours.translate(SENTENCE, decode).attention["cross"][1, 2] == 0)


def test_cells_outside_a_sliding_window_are_zero_and_said_so(tmp_path):
    from attnviz.engine.models.llm_arch import LLMArch

    ours = load_translator(make_llm_folder(tmp_path, "mistral"), "float32")  # every layer slides, window 6
    t = ours.translate(SENTENCE, DecodeConfig(max_len=8))
    arch, s = LLMArch.from_dict(ours.config.arch), len(t.src_tokens)
    for kind, maps in t.attention.items():
        outside = arch.outside_window(kind, 0, s, *maps.shape[2:])
        assert outside is not None and outside.any() and not outside.all()
        assert np.all(maps[:, :, outside] == 0)  # zero by construction, in every layer and head
        seen = np.tril(np.ones(maps.shape[2:], dtype=bool)) if kind != "cross" else True  # not a future cell
        assert np.all(maps[:, :, ~outside & seen] > 0)  # everything the window keeps has a weight


@pytest.mark.parametrize("family", ["llama", "qwen2"])  # one with a BOS its tokenizer adds, one without
def test_a_base_model_without_a_template_reads_the_bare_instruction(tmp_path, family):
    folder = make_llm_folder(tmp_path, family, template=False)
    ours, tokenizer = load_translator(folder, "float32"), transformers.AutoTokenizer.from_pretrained(folder)
    message = f"Translate the following text from German into English.\nGerman: {SENTENCE}\nEnglish:"
    prompt = ours.prompt(SENTENCE)
    assert prompt.text == message and list(prompt.ids) == tokenizer(message)["input_ids"]
    assert "template" not in prompt.roles[1:]  # only a BOS the tokenizer adds stands outside the message
