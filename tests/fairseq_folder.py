"""Tiny random NLLB-200, M2M100 and mBART-50 folders, laid out as the Hugging Face Hub does, built by
``transformers`` (test-only) with a SentencePiece model trained here on a few hundred lines of the real Multi30k
corpus (German, French and English). Nothing is downloaded.

Each folder mirrors its family's real files: ``sentencepiece.bpe.model`` (a BPE model with ``<unk>`` 0, ``<s>`` 1,
``</s>`` 2, as fairseq trains them), ``tokenizer_config.json`` naming the tokenizer class, M2M100's ``vocab.json``
(in an order of its own, as fairseq's dictionaries are: ids do not follow the SentencePiece model), and a
``vocab_size`` with fairseq's filler entries after ``<mask>``, as NLLB-200's 256,206 has."""

from __future__ import annotations

import gzip
import io
import json
import random
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import torch

SENTENCES = 300
FAMILIES = ("nllb", "m2m100", "mbart50")
FILLER = 2  # entries after the tokenizer's (NLLB-200's config has 256,206 rows for 256,204 tokens)


def corpus_lines(data_dir: Path, lang: str, n: int = SENTENCES) -> list[str]:
    with gzip.open(data_dir / f"multi30k_train.{lang}.gz", "rt", encoding="utf-8") as f:
        return [next(f).strip() for _ in range(n)]


def train_fairseq_spm(lines: list[str], model_type: str, vocab_size: int = 400) -> bytes:
    import sentencepiece

    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=model, vocab_size=vocab_size,
                                             model_type=model_type, character_coverage=1.0, unk_id=0, bos_id=1,
                                             eos_id=2, pad_id=-1, num_threads=1, minloglevel=2)
    return model.getvalue()


def _spm_pieces(proto: bytes) -> list[str]:
    import sentencepiece

    sp = sentencepiece.SentencePieceProcessor()
    sp.LoadFromSerializedProto(proto)
    return [sp.id_to_piece(i) for i in range(3, sp.get_piece_size())]


def _randomise(model: torch.nn.Module, seed: int) -> None:
    """Weights far from transformers' small initial values, so that attention is not uniform and a wrong mapping
    shows in every tensor."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1 + 0.2 * torch.randn_like(p) if name.endswith("weight") else 0.2 * torch.randn_like(p))
            else:
                p.normal_(0, 0.3)
        for name, buffer in model.named_buffers():
            if name.endswith("final_logits_bias"):
                buffer.normal_(0, 0.5)


def _config(family: str, vocab_size: int):
    from transformers import M2M100Config, MBartConfig

    shape = dict(vocab_size=vocab_size, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                 decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=256,
                 dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, scale_embedding=True, pad_token_id=1,
                 bos_token_id=0, eos_token_id=2, decoder_start_token_id=2, attn_implementation="eager")
    if family == "mbart50":
        return MBartConfig(**shape, activation_function="gelu", forced_eos_token_id=2)
    return M2M100Config(**shape, activation_function="relu")


def build_fairseq_folder(folder: Path, data_dir: Path, family: str, seed: int = 0):
    """Write a random model folder of ``family`` (one of ``FAMILIES``); returns the ``transformers`` model (eval
    mode) for comparisons."""
    from transformers import M2M100ForConditionalGeneration, MBartForConditionalGeneration

    from attnviz.engine.text.language_codes import M2M100_CODES, MBART50_CODES, NLLB_CODES

    lines = [line for lang in ("de", "fr", "en") for line in corpus_lines(data_dir, lang)]
    # mBART's "sentencepiece.bpe.model" is XLM-R's, a unigram model despite its name; NLLB's and M2M100's are BPE
    proto = train_fairseq_spm(lines, "unigram" if family == "mbart50" else "bpe")
    pieces = _spm_pieces(proto)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sentencepiece.bpe.model").write_bytes(proto)
    settings: dict = {"tokenizer_class": {"nllb": "NllbTokenizer", "m2m100": "M2M100Tokenizer",
                                          "mbart50": "MBart50Tokenizer"}[family]}
    if family == "m2m100":
        random.Random(seed).shuffle(pieces)  # fairseq's dictionary order, not the SentencePiece model's
        vocab = {p: i for i, p in enumerate(["<s>", "<pad>", "</s>", "<unk>", *pieces])}
        (folder / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
        size = len(vocab) + len(M2M100_CODES) + 8  # M2M100's eight "madeup" words
        settings |= {"language_codes": "m2m100", "num_madeup_words": 8}
    else:
        codes = NLLB_CODES if family == "nllb" else MBART50_CODES
        size = 1 + 3 + len(pieces) + len(codes) + 1 + FILLER
    (folder / "tokenizer_config.json").write_text(json.dumps(settings))
    cls = MBartForConditionalGeneration if family == "mbart50" else M2M100ForConditionalGeneration
    model = cls(_config(family, size)).eval()
    _randomise(model, seed)
    model.save_pretrained(folder)
    return model


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at, shift = at + 1, shift + 7
        if byte < 0x80:
            return value, at


def _field(data: bytes, number: int) -> bytes:
    """The first length-delimited field ``number`` of a serialized protobuf message (b"" when absent)."""
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        wire = key & 7
        if wire == 0:
            _, at = _varint(data, at)
        elif wire == 1 or wire == 5:
            at += 8 if wire == 1 else 4
        elif wire == 2:
            size, at = _varint(data, at)
            if key >> 3 == number:
                return data[at:at + size]
            at += size
        else:
            raise ValueError(f"protobuf wire type {wire} in a SentencePiece model")
    return b""


def _spm_proto(proto: bytes) -> SimpleNamespace:
    """What transformers' ``SentencePieceExtractor`` reads of a SentencePiece model (``sentencepiece_model_pb2``,
    which needs the protobuf package, absent here): the pieces with scores and types from sentencepiece itself, the
    model type, and the normaliser's precompiled character map (ModelProto field 3, NormalizerSpec field 2)."""
    import sentencepiece

    sp = sentencepiece.SentencePieceProcessor()
    sp.LoadFromSerializedProto(proto)

    def kind(i: int) -> int:  # sentencepiece_model.proto: NORMAL 1, UNKNOWN 2, CONTROL 3, USER_DEFINED 4, BYTE 6
        return 2 if sp.is_unknown(i) else 3 if sp.is_control(i) else 6 if sp.is_byte(i) else 1

    pieces = [SimpleNamespace(piece=sp.id_to_piece(i), score=sp.get_score(i), type=kind(i))
              for i in range(sp.get_piece_size())]
    return SimpleNamespace(pieces=pieces, trainer_spec=SimpleNamespace(model_type=2, unk_id=sp.unk_id()),
                           normalizer_spec=SimpleNamespace(precompiled_charsmap=_field(_field(proto, 3), 2)))


def reference_tokenizer(folder: Path, family: str):
    """The ``transformers`` tokenizer of the folder. M2M100's is the SentencePiece tokenizer itself. NLLB-200's and
    mBART-50's are built from ``sentencepiece.bpe.model`` (the file the Hub's folders ship and the 4.x line read) by
    transformers' own converter (``SentencePieceExtractor``, the family's ``convert_from_spm``, the tokenizer's
    BPE with the model's normaliser); only the protobuf parsing the extractor delegates to ``protobuf`` is done by
    ``_spm_proto``."""
    from transformers import M2M100Tokenizer, MBart50Tokenizer, NllbTokenizer
    from transformers.convert_slow_tokenizer import SentencePieceExtractor

    from attnviz.engine.text.language_codes import MBART50_CODES, NLLB_CODES

    spm = folder / "sentencepiece.bpe.model"
    if family == "m2m100":
        return M2M100Tokenizer(vocab_file=str(folder / "vocab.json"), spm_file=str(spm))
    cls, codes = (NllbTokenizer, NLLB_CODES) if family == "nllb" else (MBart50Tokenizer, MBART50_CODES)

    def read(self, model: str) -> None:
        self.proto = _spm_proto(Path(model).read_bytes())

    with mock.patch.object(SentencePieceExtractor, "__init__", read):
        # the language tags, then <mask>, at the ids the Hub's tokenizer files give them (NLLB-200's eng_Latn is
        # 256047, its <mask> 256203): the converter keeps only the model's own pieces and would add <mask> first
        tok = cls.from_pretrained(str(folder), vocab_file=str(spm), extra_special_tokens=list(codes),
                                  **({"mask_token": None} if family == "nllb" else {}))
    if family == "nllb":
        tok.add_special_tokens({"mask_token": "<mask>"})
    return tok
