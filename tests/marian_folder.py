"""Tiny random MarianMT folders, laid out as the Hugging Face Hub does, built by ``transformers`` (test-only) with
SentencePiece models trained here on a few hundred lines of the real Multi30k corpus. Nothing is downloaded."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import torch

SENTENCES = 300
EOS_BOOST = 1.0  # added to the end token's output bias: random hypotheses end at various lengths
# the big layout's weights: larger than transformers' 0.02, so that a random model's outputs depend on its input
INIT_STD = 0.5


def _lines(data_dir: Path, lang: str) -> list[str]:
    with gzip.open(data_dir / f"multi30k_train.{lang}.gz", "rt", encoding="utf-8") as f:
        return [next(f).strip() for _ in range(SENTENCES)]


def train_spm(lines: list[str], vocab_size: int) -> bytes:
    import sentencepiece

    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=model, vocab_size=vocab_size,
                                             model_type="unigram", character_coverage=1.0, bos_id=-1, eos_id=1,
                                             unk_id=0, pad_id=-1, minloglevel=2)
    return model.getvalue()


def marian_vocab(*spm_models: bytes) -> dict[str, int]:
    """Marian's layout: ``</s>`` 0, ``<unk>`` 1, every piece of the SentencePiece models, ``<pad>`` last."""
    import sentencepiece

    pieces: list[str] = ["</s>", "<unk>"]
    for proto in spm_models:
        sp = sentencepiece.SentencePieceProcessor()
        sp.LoadFromSerializedProto(proto)
        pieces += [sp.id_to_piece(i) for i in range(sp.get_piece_size()) if sp.id_to_piece(i) not in pieces]
    pieces = [p for p in pieces if p != "<s>"] + ["<pad>"]
    return {p: i for i, p in enumerate(pieces)}


def big_vocab(vocab: dict[str, int]) -> dict[str, int]:
    """OPUS-MT big's layout (``opus-mt-tc-big-*``): ``<unk>`` first, ``</s>`` among the pieces (43311 of 53017
    there), ``<pad>`` (the decoder's start) last: no special token at id 0 but ``<unk>``."""
    pieces = [p for p in sorted(vocab, key=vocab.get) if p not in ("</s>", "<unk>", "<pad>")]
    pieces = ["<unk>", *pieces]
    pieces.insert(len(pieces) * 3 // 4, "</s>")
    return {p: i for i, p in enumerate([*pieces, "<pad>"])}


def build_marian_folder(folder: Path, data_dir: Path, shared: bool = True, weights: str = "safetensors",
                        seed: int = 0, big: bool = False, generation: dict | None = None):
    """Write a random Marian model folder; returns the ``MarianMTModel`` (eval mode) for comparisons.

    ``big``: laid out as OPUS-MT big (relu, float16 weights, the end token in the middle of the vocabulary; the
    returned model holds the float16 values); ``generation``: a generation_config.json to write."""
    from transformers import MarianConfig, MarianMTModel

    source, target = train_spm(_lines(data_dir, "de"), 150), train_spm(_lines(data_dir, "en"), 120)
    vocab = marian_vocab(source, target)
    vocab = big_vocab(vocab) if big else vocab
    config = MarianConfig(vocab_size=len(vocab), decoder_vocab_size=len(vocab), d_model=32, encoder_layers=2,
                          decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
                          decoder_ffn_dim=64, max_position_embeddings=64, pad_token_id=len(vocab) - 1,
                          eos_token_id=vocab["</s>"], decoder_start_token_id=len(vocab) - 1,
                          activation_function="relu" if big else "swish", scale_embedding=True,
                          share_encoder_decoder_embeddings=shared, attn_implementation="eager",
                          init_std=INIT_STD if big else 0.02)
    torch.manual_seed(seed)
    model = MarianMTModel(config).eval()
    with torch.no_grad():  # random biases too, so a wrong bias mapping shows
        model.final_logits_bias.normal_(0, 0.5)
        model.final_logits_bias[0, vocab["</s>"]] += EOS_BOOST  # various lengths: the stopping rules show
        if big:
            for p in model.parameters():
                p.copy_(p.half().float())
    folder.mkdir(parents=True, exist_ok=True)
    (model.half() if big else model).save_pretrained(folder)
    model.float()
    if generation is not None:
        (folder / "generation_config.json").write_text(json.dumps(generation))
    if weights == "bin":
        (folder / "model.safetensors").unlink()
        torch.save({k: v.clone() for k, v in model.state_dict().items()}, folder / "pytorch_model.bin")
    (folder / "source.spm").write_bytes(source)
    (folder / "target.spm").write_bytes(target)
    (folder / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(json.dumps({"source_lang": "de", "target_lang": "en"}))
    return model
