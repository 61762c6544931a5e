"""An imported Marian folder decodes as its authors configured it and writes text as its tokenizer does: OPUS-MT big's
layout (relu, float16 weights, the end token not at id 0) computes what ``transformers`` computes; a beam search set
by ``generation_config.json`` (beams, length penalty, early stopping, banned and repeated n-grams, forced end token)
gives exactly ``generate``'s hypothesis; the text is ``MarianTokenizer.decode(skip_special_tokens=True)``'s, pieces the
target SentencePiece model does not know included."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from attnviz.cli.main import main
from attnviz.engine.config import DecodeConfig
from attnviz.engine.loading import load_translator
from attnviz.engine.search.tree import SearchTree
from tests.marian_folder import build_marian_folder

pytest.importorskip("transformers", reason="the parity checks need the test extra (pip install -e '.[test]')")
pytestmark = pytest.mark.data

CORPUS = ["Zwei Hunde spielen im Schnee.", "Ein Mann fährt Fahrrad auf einer Straße.",
          "Eine Frau sitzt auf einer Bank und liest ein Buch.", "Kinder spielen im Wasser."]
CONFIGURED = {"num_beams": 4, "max_length": 24, "length_penalty": 1.0, "bad_words_ids": None,
              "forced_eos_token_id": None, "early_stopping": False}


@pytest.fixture(scope="module")
def big(tmp_path_factory, data_dir):
    """An OPUS-MT-big-shaped folder (eos not 0, pad = decoder start last, relu, float16) configured as the Hub's
    opus-mt folders are (beam 4, <pad> banned, the end token forced at the limit)."""
    folder = tmp_path_factory.mktemp("big") / "opus-mt-tc-big-de-en"
    hf = build_marian_folder(folder, data_dir, big=True, generation={})
    vocab = json.loads((folder / "vocab.json").read_text())
    pad, eos = vocab["<pad>"], vocab["</s>"]
    assert eos not in (0, pad) and hf.config.eos_token_id == eos and hf.config.decoder_start_token_id == pad
    generation = {"num_beams": 4, "max_length": 24, "bad_words_ids": [[pad]], "forced_eos_token_id": eos,
                  "eos_token_id": eos, "pad_token_id": pad, "decoder_start_token_id": pad, "bos_token_id": 0}
    (folder / "generation_config.json").write_text(json.dumps(generation))
    return folder, hf, vocab


def _with(folder, tmp_path, **changes):
    copy = tmp_path / folder.name
    shutil.copytree(folder, copy)
    generation = json.loads((copy / "generation_config.json").read_text()) | changes
    (copy / "generation_config.json").write_text(json.dumps(generation))
    return copy


def _marian_ids(translator, vocab, text):
    return [vocab[p] for p in translator.src_spec.tokenize(text)] + [vocab["</s>"]]


def _hf(hf, ids, generation, vocab):
    kwargs = {k: v for k, v in generation.items() if k in ("num_beams", "max_length", "length_penalty",
                                                           "no_repeat_ngram_size", "bad_words_ids",
                                                           "forced_eos_token_id", "early_stopping")}
    kwargs.setdefault("bad_words_ids", None)
    kwargs.setdefault("forced_eos_token_id", None)
    with torch.no_grad():
        out = hf.generate(torch.tensor([ids]), do_sample=False, min_length=0, **kwargs)[0, 1:].tolist()
    eos = vocab["</s>"]
    return out[:out.index(eos)] if eos in out else out


def _ours(translator, text, decode, vocab) -> tuple[list[int], set[int]]:
    """attnviz's hypothesis (as the folder's ids) and the lengths of the hypotheses finished on the way."""
    batch = translator.translate_batch_tokens([text], decode)[0]
    lengths = {len(batch)}
    if decode.beam > 1:  # the events' best hypothesis is the batched search's
        tree = SearchTree.from_events(translator.beam_steps(text, decode))
        best = [s.token for s in tree.path(tree.chosen)]
        assert [t for t in best if t != "<eos>"] == batch
        lengths = {n.step.index for n in tree.nodes.values() if n.status == "finished"}
    return [vocab[t] for t in batch], lengths


@pytest.mark.parametrize("changes", [
    {},
    {"length_penalty": 2.0, "early_stopping": "never"},
    {"length_penalty": 0.5, "early_stopping": True, "no_repeat_ngram_size": 2},
    {"length_penalty": -1.0, "num_beams": 3, "no_repeat_ngram_size": 1},
    {"num_beams": 1, "no_repeat_ngram_size": 2},
], ids=["hub-defaults", "never-2.0", "true-0.5-ngram2", "negative-penalty", "greedy"])
def test_the_configured_search_gives_generates_hypothesis(big, tmp_path, changes):
    folder, hf, vocab = big
    folder = _with(folder, tmp_path, **changes)
    generation = json.loads((folder / "generation_config.json").read_text())
    translator = load_translator(folder)
    decode = translator.card.decoding
    assert decode is not None and decode.configured and decode.beam == generation["num_beams"]
    assert decode.max_len == 23 and decode.forced_eos == 3 and decode.bad_words == ((1,),)
    lengths: set[int] = set()
    for text in CORPUS:
        theirs = _hf(hf, _marian_ids(translator, vocab, text), generation, vocab)
        ours, finished = _ours(translator, text, decode, vocab)
        assert ours == theirs, text
        lengths |= finished
    assert len(lengths) > 1  # hypotheses end at different lengths: the ranking and stopping rules were exercised


def test_attnvizs_own_gnmt_search_differs_from_the_configured_one_somewhere(big):
    """The configured rules are not attnviz's: the same beam under GNMT ranking gives another hypothesis for some
    sentence, so the parity above checks transformers' rule and not a coincidence."""
    folder, _, _ = big
    translator = load_translator(folder)
    configured = translator.card.decoding.replace(length_penalty=2.0, early_stopping="never")
    own = DecodeConfig(beam=4, max_len=23, length_penalty=2.0)
    assert any(translator.translate_batch_tokens([t], configured) != translator.translate_batch_tokens([t], own)
               for t in CORPUS)


def test_forced_end_token_is_marked_forced_in_the_events(big, tmp_path):
    folder, _, _ = big
    translator = load_translator(_with(folder, tmp_path, max_length=3, num_beams=1))
    steps = list(translator.steps(CORPUS[0], translator.card.decoding))[1:]
    assert len(steps) == 2 and [s.forced for s in steps] == [False, True] and steps[-1].token == "<eos>"


def test_text_is_the_reference_tokenizers_decode_on_corpus_lines(big):
    from transformers import MarianTokenizer

    folder, hf, vocab = big
    tokenizer = MarianTokenizer.from_pretrained(folder)
    translator = load_translator(folder)
    decode = translator.card.decoding
    for text in CORPUS:
        ids = _hf(hf, _marian_ids(translator, vocab, text), json.loads((folder / "generation_config.json")
                                                                          .read_text()), vocab)
        assert translator.translate_batch([text], decode)[0] == tokenizer.decode(ids, skip_special_tokens=True)


def test_pieces_the_target_model_does_not_know_come_back_as_words(big):
    """vocab.json holds both sides' pieces; a source-only piece decoded on the target side keeps no "▁" in the text
    (``attnviz translate`` printed "▁Frauen▁Frauen" where transformers writes "Frauen Frauen")."""
    import sentencepiece
    from transformers import MarianTokenizer

    folder, _, vocab = big
    target = sentencepiece.SentencePieceProcessor()
    target.LoadFromSerializedProto((folder / "target.spm").read_bytes())
    known = {target.id_to_piece(i) for i in range(target.get_piece_size())}
    foreign = [p for p in vocab if p.startswith("\u2581") and len(p) > 3 and p not in known][:3]
    assert len(foreign) == 3
    translator = load_translator(folder)
    tokenizer = MarianTokenizer.from_pretrained(folder)
    for pieces in ([foreign[0], foreign[0]], ["\u2581a", *foreign, "s", ".", "<eos>"], [foreign[1][1:], "<unk>"]):
        pieces = [p for p in pieces if p in vocab or p in ("<eos>", "<unk>")]
        ids = [vocab["</s>"] if p == "<eos>" else vocab[p] for p in pieces]
        text = translator.detokenize(pieces)
        assert text == tokenizer.decode(ids, skip_special_tokens=True) and "\u2581" not in text


def test_the_cli_says_and_uses_the_configured_decoding(big, capsys):
    folder, hf, vocab = big
    translator = load_translator(folder)
    expected = translator.translate_batch([CORPUS[1]], translator.card.decoding)[0]
    assert main(["translate", "-m", str(folder), CORPUS[1]]) == 0
    captured = capsys.readouterr()
    assert captured.out.strip() == expected
    assert ("attnviz: decoding as configured by the model (beam 4, length penalty 1 (length ** penalty), early "
            "stopping false, at most 23 tokens, 1 banned token sequence, forced end token) (--decoding attnviz for "
            "attnviz's own settings)") in captured.err
    assert main(["translate", "-m", str(folder), "--decoding", "attnviz", CORPUS[1]]) == 0
    captured = capsys.readouterr()
    assert captured.out.strip() == translator.translate(CORPUS[1]).text and "configured" not in captured.err
    assert main(["translate", "-m", str(folder), "--beam", "2", CORPUS[1]]) == 0
    assert "decoding as configured by the model, --beam changed (beam 2, length penalty 1" in capsys.readouterr().err
    assert main(["info", str(folder)]) == 0
    assert "  decoding   as configured by the model (beam 4, " in capsys.readouterr().out


def test_a_converted_file_keeps_the_configured_decoding(big, tmp_path):
    folder, _, _ = big
    out = tmp_path / "big.safetensors"
    assert main(["convert", str(folder), "--out", str(out)]) == 0
    converted, original = load_translator(out), load_translator(folder)
    assert converted.card.decoding == original.card.decoding
    assert converted.translate_batch(CORPUS, converted.card.decoding) == original.translate_batch(
        CORPUS, original.card.decoding)
