"""NLLB-200, M2M100 and mBART-50 folders decode as their authors configured them: ``generation_config.json`` sets the
default search (beams, length penalty, length limit, early stopping, forced end token), the chosen target language is
the forced first token at log-probability 0 (transformers' ``forced_bos_token_id``), and the hypothesis is exactly
``generate``'s, in batches and in the step-by-step events alike, where the forced tag and end are marked forced."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from attnviz.engine.hub.fairseq_files import folder_parts
from attnviz.engine.loading import load_translator
from attnviz.engine.search.tree import SearchTree
from attnviz.engine.text.vocab import EOS_ID
from tests.fairseq_folder import FAMILIES, build_fairseq_folder

pytest.importorskip("transformers", reason="the parity checks need the test extra (pip install -e '.[test]')")
pytestmark = pytest.mark.data

SENTENCES = ["Zwei Hunde spielen im Schnee.", "Ein Mann fährt Fahrrad auf einer Straße.",
             "Eine Frau sitzt auf einer Bank und liest ein Buch.", "Kinder spielen im Wasser."]
MODEL_TYPE = {"nllb": "m2m_100", "m2m100": "m2m_100", "mbart50": "mbart"}
IDS = {"bos_token_id": 0, "pad_token_id": 1, "eos_token_id": 2, "decoder_start_token_id": 2}
# how far the decoder's last layer norm leans towards </s>: a random model hardly ever ends a sentence, and one that
# never does would leave the ranking and stopping rules unchecked (found by trying: hypotheses then end at 2 to 22)
TOWARDS_END = {"nllb": 4.0, "m2m100": 4.0, "mbart50": 3.0}


@pytest.fixture(scope="module", params=FAMILIES)
def family(request, tmp_path_factory, data_dir):
    folder = tmp_path_factory.mktemp(request.param) / f"{request.param}-tiny-random"
    hf = build_fairseq_folder(folder, data_dir, request.param)
    end = hf.get_input_embeddings().weight[2]
    with torch.no_grad():
        hf.model.decoder.layer_norm.bias += TOWARDS_END[request.param] * end / end.norm()
    hf.save_pretrained(folder)
    return request.param, folder, hf


def _configured(folder, tmp_path, **settings):
    copy = tmp_path / folder.name
    shutil.copytree(folder, copy)
    (copy / "generation_config.json").write_text(json.dumps(IDS | settings))
    return copy


def _generate(hf, src: list[int], tag: int, settings: dict) -> list[int]:
    """``generate``'s hypothesis after the forced tag, without the end token (``<pad>`` banned, as attnviz never
    chooses it)."""
    with torch.no_grad():
        out = hf.generate(torch.tensor([src]), do_sample=False, min_length=0, forced_bos_token_id=tag,
                          bad_words_ids=[[1]], no_repeat_ngram_size=0, **settings)[0].tolist()
    assert out[:2] == [2, tag]
    out = out[2:]
    return out[:out.index(2)] if 2 in out else out


@pytest.mark.parametrize("settings", [
    {"num_beams": 4, "max_length": 24, "length_penalty": 1.0, "early_stopping": True, "forced_eos_token_id": 2},
    {"num_beams": 4, "max_length": 16, "length_penalty": 2.0, "early_stopping": "never", "forced_eos_token_id": 2},
    {"num_beams": 4, "max_length": 24, "length_penalty": 0.5, "early_stopping": False},
    {"num_beams": 1, "max_length": 12, "forced_eos_token_id": 2},
], ids=["hub-like", "never-2.0", "false-0.5", "greedy"])
def test_the_configured_search_gives_generates_hypothesis_after_the_forced_tag(family, tmp_path, settings):
    name, folder, hf = family
    translator = load_translator(_configured(folder, tmp_path, **settings))
    decode = translator.card.decoding
    assert decode is not None and decode.configured and decode.beam == settings["num_beams"]
    assert decode.max_len == settings["max_length"] - 1 and decode.forced_bos == -1
    assert decode.forced_eos == (EOS_ID if "forced_eos_token_id" in settings else -1)  # </s> ends, not <sos>
    order = folder_parts(folder, MODEL_TYPE[name]).order
    for tgt in ("en", "fr"):
        translator.use_languages(src="de", tgt=tgt)
        tag = order[translator.tgt_vocab.id(translator.languages.tgt)]
        lengths = set()
        for text in SENTENCES:
            src = [order[i] for i in translator.prepare_source(text)[1]]
            theirs = _generate(hf, src, tag, {"forced_eos_token_id": None} | settings)
            batch = translator.translate_batch_tokens([text], decode)[0]
            assert [order[translator.tgt_vocab.id(t)] for t in batch] == theirs, (name, tgt, text)
            tree = SearchTree.from_events(translator.beam_steps(text, decode) if decode.beam > 1
                                          else translator.steps(text, decode))
            path = [s.token for s in tree.path(tree.chosen)]
            assert path[0] == translator.languages.tgt and [t for t in path[1:] if t != "<eos>"] == batch
            lengths |= {n.step.index for n in tree.nodes.values() if n.status == "finished"}
        assert decode.beam == 1 or len(lengths) > 1  # hypotheses ended at different lengths: the rules were used


def test_the_forced_tag_and_end_are_marked_forced_in_the_events(family, tmp_path):
    name, folder, _ = family
    translator = load_translator(_configured(folder, tmp_path, num_beams=4, max_length=3, forced_eos_token_id=2))
    translator.use_languages(src="de", tgt="en")
    for events in (translator.steps(SENTENCES[0], translator.card.decoding.replace(beam=1)),
                   translator.beam_steps(SENTENCES[0], translator.card.decoding)):
        tree = SearchTree.from_events(events)
        steps = tree.path(tree.chosen)  # the tag (forced first), then the end the limit forces
        assert [(s.token, s.forced) for s in steps] == [(translator.languages.tgt, True), ("<eos>", True)]


def test_the_card_says_the_configured_decoding(family, tmp_path):
    _, folder, _ = family
    translator = load_translator(_configured(folder, tmp_path, num_beams=5, max_length=200, early_stopping=True))
    label = translator.card.decoding_label()
    assert label is not None and label.startswith("as configured by the model (beam 5, length penalty 1")
    assert "at most 199 tokens" in label
