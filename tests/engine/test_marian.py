"""MarianMT folders: attnviz's own implementation computes what ``transformers`` computes (logits and every
attention tensor within 1e-5, the same greedy tokens), for .safetensors and .bin weights, shared and separate
embeddings, before and after ``attnviz convert``; anything else gets a clear message."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch

from attnviz.cli.main import main
from attnviz.engine.config import DecodeConfig
from attnviz.engine.errors import CheckpointError
from attnviz.engine.loading import load_translator, read_card
from tests.marian_folder import build_marian_folder

pytest.importorskip("transformers", reason="the parity checks need the test extra (pip install -e '.[test]')")
pytestmark = pytest.mark.data

SENTENCES = ["Zwei Hunde spielen im Schnee.", "Ein Mann fährt Fahrrad auf einer Straße."]


@pytest.fixture(scope="module", params=[("safetensors", True), ("bin", True), ("safetensors", False)],
                ids=["safetensors-shared", "bin-shared", "safetensors-separate"])
def marian(request, tmp_path_factory, data_dir):
    weights, shared = request.param
    folder = tmp_path_factory.mktemp("marian") / "opus-mt-de-en"
    hf = build_marian_folder(folder, data_dir, shared=shared, weights=weights)
    return folder, hf


def _marian_ids(translator, text: str) -> tuple[list[int], list[int]]:
    """attnviz's source ids for ``text`` and the same tokens as Marian ids."""
    _, ids, _ = translator.prepare_source(text)
    order = _orders(translator)[0]
    return ids, [order[i] for i in ids]


def _orders(translator) -> tuple[list[int], list[int]]:
    vocab = json.loads((translator_folder(translator) / "vocab.json").read_text())
    to_marian = {piece: i for piece, i in vocab.items()}
    pad, eos, unk = to_marian["<pad>"], to_marian["</s>"], to_marian["<unk>"]
    specials = [unk, pad, pad, eos]
    src = specials + [to_marian[p] for p in translator.src_vocab.to_list()[4:]]
    tgt = specials + [to_marian[p] for p in translator.tgt_vocab.to_list()[4:]]
    return src, tgt


def translator_folder(translator):
    from pathlib import Path

    return Path(translator.metadata["marian_folder"])


def _check_parity(translator, hf, text: str) -> None:
    ours_src, marian_src = _marian_ids(translator, text)
    _, tgt_order = _orders(translator)
    tgt_ours = [2, 10, 11, 12, 13]  # <sos> then four pieces
    tgt_marian = [tgt_order[i] for i in tgt_ours]
    with torch.no_grad():
        out = hf(input_ids=torch.tensor([marian_src]), decoder_input_ids=torch.tensor([tgt_marian]),
                 output_attentions=True)
        model = translator.model
        enc = model.encode(torch.tensor([ours_src]), need_weights=True)
        dec = model.decode(torch.tensor([tgt_ours]), enc, need_weights=True)
        logits = model.project(dec.hidden)
    np.testing.assert_allclose(logits[0].numpy(), out.logits[0][:, tgt_order].numpy(), atol=1e-5)
    for ours, theirs in ((enc.attention, out.encoder_attentions), (dec.self_attention, out.decoder_attentions),
                         (dec.cross_attention, out.cross_attentions)):
        assert len(ours) == len(theirs) == 2
        for a, b in zip(ours, theirs, strict=True):
            np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-5)


def _check_greedy(translator, hf, text: str, steps: int = 12) -> None:
    _, marian_src = _marian_ids(translator, text)
    _, tgt_order = _orders(translator)
    pad = hf.config.pad_token_id
    with torch.no_grad():
        generated = hf.generate(torch.tensor([marian_src]), num_beams=1, do_sample=False, max_new_tokens=steps,
                                bad_words_ids=[[pad]], forced_eos_token_id=None, min_length=0)
    ours = translator.translate(text, DecodeConfig(max_len=steps))
    assert [tgt_order[translator.tgt_vocab.id(t)] for t in ours.tokens] == generated[0, 1:].tolist()


def test_logits_attention_and_greedy_tokens_equal_transformers(marian):
    folder, hf = marian
    translator = load_translator(folder)
    translator.metadata["marian_folder"] = str(folder)
    assert translator.config.share_embeddings == hf.config.share_encoder_decoder_embeddings
    for text in SENTENCES:
        _check_parity(translator, hf, text)
        _check_greedy(translator, hf, text)


def test_a_converted_file_loads_alone_and_decodes_the_same(marian, tmp_path):
    folder, hf = marian
    out = tmp_path / "marian.safetensors"
    assert main(["convert", str(folder), "--out", str(out), "--alignment-head", "2.1"]) == 0
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    shutil.rmtree(folder)  # the converted file must need nothing from the folder
    try:
        converted = load_translator(out)
        converted.metadata["marian_folder"] = str(copy)
        _check_parity(converted, hf, SENTENCES[0])
        _check_greedy(converted, hf, SENTENCES[1])
        card = read_card(out)
        assert card.kind.name == "marian" and card.languages == "German -> English" and card.alignment_head == (1, 0)
        assert card.parameters == sum(p.numel() for p in {id(p): p for p in converted.model.parameters()}.values())
    finally:
        shutil.copytree(copy, folder)


def test_the_cli_translates_and_describes_a_folder(marian, capsys):
    folder, _ = marian
    translator = load_translator(folder)
    expected = translator.translate(SENTENCES[0], DecodeConfig(max_len=10)).text
    assert main(["translate", "-m", str(folder), "--max-len", "10", SENTENCES[0]]) == 0
    assert capsys.readouterr().out.strip() == expected
    assert main(["info", str(folder)]) == 0
    text = capsys.readouterr().out
    assert "German -> English" in text and "marian: MarianMT d_model 32, 2+2 layers, 4 heads" in text


@pytest.fixture()
def folder_copy(marian, tmp_path):
    copy = tmp_path / "model"
    shutil.copytree(marian[0], copy)
    return copy


def _edit_config(folder, **changes):
    config = json.loads((folder / "config.json").read_text())
    config.update(changes)
    (folder / "config.json").write_text(json.dumps(config))


@pytest.mark.parametrize("change, message", [
    (dict(model_type="bert"), "holds a 'bert' model"),
    (dict(normalize_before=True), "'normalize_before' is True, which attnviz's Marian implementation does not"),
    (dict(d_model=48), "(model.safetensors|pytorch_model.bin): tensor .* has shape \\[(\\d+, )?32\\], but "
                       "config.json implies \\[(\\d+, )?48\\]"),
    (dict(encoder_ffn_dim=128, decoder_ffn_dim=128), "has shape \\[64(, 32)?\\], but config.json implies "
                                                     "\\[128(, 32)?\\]"),
    (dict(decoder_attention_heads=2), "needs the encoder and decoder to agree"),
    (dict(activation_function="mish"), "activation must be one of"),
])
def test_unsupported_or_inconsistent_folders_get_a_clear_message(folder_copy, change, message):
    _edit_config(folder_copy, **change)
    with pytest.raises(CheckpointError, match=message):
        load_translator(folder_copy)


def test_a_folder_without_target_spm_names_the_missing_file(folder_copy):
    (folder_copy / "target.spm").unlink()
    with pytest.raises(CheckpointError, match="lacks target.spm"):
        load_translator(folder_copy)
    with pytest.raises(CheckpointError, match="lacks target.spm"):
        read_card(folder_copy)


def test_attention_export_can_merge_pieces_into_words(marian, tmp_path):
    folder, _ = marian
    npz = tmp_path / "a.npz"
    assert main(["translate", "-m", str(folder), "--max-len", "8", "--attention", str(npz), "--merge-subwords",
                 SENTENCES[0]]) == 0
    data = np.load(npz)
    assert "".join(data["src_tokens"][:-1]) == "".join(SENTENCES[0].split())  # words, without the piece marks
    assert data["cross"].shape[-1] == len(data["src_tokens"]) < len(load_translator(folder).prepare_source(
        SENTENCES[0])[0])
    for kind in ("encoder", "decoder", "cross"):
        np.testing.assert_allclose(data[kind].sum(-1), 1.0, atol=1e-5)
    sidecar = json.loads(npz.with_suffix(".json").read_text())
    assert sidecar["translations"][0]["units"] == "words (subword pieces merged)"
    # the per-step figures stay, per piece decoded, as the unmerged export has them
    pieces = tmp_path / "pieces.npz"
    assert main(["translate", "-m", str(folder), "--max-len", "8", "--attention", str(pieces), SENTENCES[0]]) == 0
    unmerged = np.load(pieces)
    assert list(data["step_tokens"]) == list(unmerged["tokens"]) and len(data["tokens"]) <= len(data["step_tokens"])
    for key in ("probabilities", "entropy", "topk_tokens", "topk_probabilities"):
        assert data[key].shape[0] == len(data["step_tokens"])
        np.testing.assert_array_equal(data[key], unmerged[key])
    assert sidecar["translations"][0]["step_units"] == "pieces (step_tokens)"
    assert sidecar["model"]["name"] == folder.name and str(tmp_path) not in npz.with_suffix(".json").read_text()


def test_align_reads_marian_pieces_as_the_set_words_with_no_source_sos(marian):
    """Marian reads its source without <sos>: the first source piece is column 0, not a special to drop."""
    from attnviz.engine.analysis.alignment import align_steps
    from attnviz.engine.analysis.corpus import forward_batch
    from attnviz.engine.subwords import merge_matrix, word_spans

    translator = load_translator(marian[0])
    src, tgt = SENTENCES[0].split(), "A man rides his bike through the city .".split()
    result = list(align_steps(translator, [src], [tgt], layer=0, head=0))[-1]
    # the same words the independent way: whole-line pieces, merged by the pieces' word-start marks
    src_pieces, tgt_pieces = (spec.tokenize(" ".join(words)) for spec, words in
                              ((translator.src_spec, src), (translator.tgt_spec, tgt)))
    src_ids = translator.src_vocab.encode(src_pieces, add_sos_eos=True)[1:]  # pieces <eos>
    tgt_in = translator.tgt_vocab.encode(tgt_pieces, add_sos_eos=True)[:-1]  # <sos> pieces
    cross = forward_batch(translator.model, torch.tensor([src_ids]), torch.tensor([tgt_in]), ("cross",))["cross"]
    rows = cross[0, 0, 0, :, : len(src_pieces)].numpy()  # [pieces, source pieces]: drop <eos> only
    rows = rows / rows.sum(-1, keepdims=True)
    words = merge_matrix(rows, word_spans(translator.tgt_spec.word_starts(tgt_pieces)),
                         word_spans(translator.src_spec.word_starts(src_pieces)))
    assert words.shape == (len(tgt), len(src))
    assert set(result.alignments[0].split()) == {f"{i}-{j}" for j, i in enumerate(words.argmax(-1))}
