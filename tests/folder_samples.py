"""Tiny random model folders of every registered folder format, written here from random tensors (no download, no
``transformers``), for the hostile-folder battery and the ``attnviz info`` benchmark.

``SAMPLES`` maps a format's registry name to a function writing a valid folder of it; the battery fails for a
registered format without one, so a format added later is tested as soon as it is registered."""

from __future__ import annotations

import io
import json
import random
from collections.abc import Callable
from pathlib import Path

import torch
from safetensors.torch import save_file

_WORDS = ("haus hund katze mann frau kind spielt läuft schnee straße wasser grün rot blau ein eine der die das "
          "und mit auf im am zwei drei alte junge kleine große fährt sitzt steht trinkt isst").split()


def synthetic_lines(seed: int, n: int = 200) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(_WORDS) for _ in range(rng.randint(3, 9))) for _ in range(n)]


def train_spm(lines: list[str], vocab_size: int) -> bytes:
    """A unigram SentencePiece model laid out as Marian's are: ``<unk>`` 0, ``</s>`` 1, no ``<s>`` or ``<pad>``."""
    import sentencepiece

    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=model, vocab_size=vocab_size,
                                             model_type="unigram", character_coverage=1.0, bos_id=-1, eos_id=1,
                                             unk_id=0, pad_id=-1, hard_vocab_limit=False, num_threads=1, minloglevel=2)
    return model.getvalue()


def marian_vocab(spm_models: list[bytes], extra: int = 0) -> dict[str, int]:
    """Marian's layout: ``</s>`` 0, ``<unk>`` 1, every piece of the SentencePiece models, ``extra`` filler pieces
    (to reach a real model's size), ``<pad>`` last."""
    import sentencepiece

    pieces: list[str] = ["</s>", "<unk>"]
    for proto in spm_models:
        sp = sentencepiece.SentencePieceProcessor()
        sp.LoadFromSerializedProto(proto)
        pieces += [sp.id_to_piece(i) for i in range(sp.get_piece_size()) if sp.id_to_piece(i) not in pieces]
    pieces += [f"▁filler{i}" for i in range(extra)] + ["<pad>"]
    return {p: i for i, p in enumerate(pieces)}


_LAYER = {"encoder": ("self_attn", "fc1", "fc2", "self_attn_layer_norm", "final_layer_norm"),
          "decoder": ("self_attn", "encoder_attn", "fc1", "fc2", "self_attn_layer_norm", "encoder_attn_layer_norm",
                      "final_layer_norm")}


def marian_tensors(vocab: int, d_model: int, layers: int, ffn: int, shared: bool = True) -> dict[str, torch.Tensor]:
    """Random weights under Hugging Face's MarianMTModel names (as ``save_pretrained`` writes them)."""
    def part(name: str, rows: int, cols: int | None) -> dict[str, torch.Tensor]:
        if name.endswith("attn"):
            return {k: v for p in ("q_proj", "k_proj", "v_proj", "out_proj")
                    for k, v in part(f"{name}.{p}", d_model, d_model).items()}
        weight = torch.randn(rows, cols) * 0.1 if cols else 1 + 0.1 * torch.randn(rows)
        return {f"{name}.weight": weight, f"{name}.bias": 0.1 * torch.randn(rows)}

    sizes = {"fc1": (ffn, d_model), "fc2": (d_model, ffn)}
    out: dict[str, torch.Tensor] = {}
    for side, parts in _LAYER.items():
        for i in range(layers):
            for name in parts:
                rows, cols = sizes.get(name, (d_model, None if name.endswith("norm") else d_model))
                out |= part(f"model.{side}.layers.{i}.{name}", rows, cols)
    if shared:
        out["model.shared.weight"] = torch.randn(vocab, d_model) * 0.1
    else:
        for name in ("model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight", "lm_head.weight"):
            out[name] = torch.randn(vocab, d_model) * 0.1
    out["final_logits_bias"] = 0.5 * torch.randn(1, vocab)
    return out


def write_marian_folder(folder: Path, *, d_model: int = 32, layers: int = 2, heads: int = 4, ffn: int = 64,
                        extra_vocab: int = 0, shared: bool = True, seed: int = 0) -> Path:
    """A random MarianMT folder as the Hub lays it out (config.json, model.safetensors, source.spm, target.spm,
    vocab.json, tokenizer_config.json); the defaults give a tiny one, Marian-sized arguments a real-sized one."""
    torch.manual_seed(seed)
    source, target = train_spm(synthetic_lines(seed), 60), train_spm(synthetic_lines(seed + 1), 50)
    vocab = marian_vocab([source, target], extra_vocab)
    config = {"model_type": "marian", "architectures": ["MarianMTModel"], "d_model": d_model,
              "encoder_layers": layers, "decoder_layers": layers, "encoder_attention_heads": heads,
              "decoder_attention_heads": heads, "encoder_ffn_dim": ffn, "decoder_ffn_dim": ffn,
              "max_position_embeddings": 64, "activation_function": "swish", "scale_embedding": True,
              "vocab_size": len(vocab), "decoder_vocab_size": len(vocab), "pad_token_id": len(vocab) - 1,
              "eos_token_id": 0, "decoder_start_token_id": len(vocab) - 1,
              "share_encoder_decoder_embeddings": shared, "tie_word_embeddings": shared}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    save_file(marian_tensors(len(vocab), d_model, layers, ffn, shared), folder / "model.safetensors",
              metadata={"format": "pt"})
    (folder / "source.spm").write_bytes(source)
    (folder / "target.spm").write_bytes(target)
    (folder / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(json.dumps({"source_lang": "de", "target_lang": "en"}))
    pad = len(vocab) - 1  # as the Hub's opus-mt folders configure their decoding
    (folder / "generation_config.json").write_text(json.dumps({
        "bad_words_ids": [[pad]], "bos_token_id": 0, "decoder_start_token_id": pad, "eos_token_id": 0,
        "forced_eos_token_id": 0, "max_length": 512, "num_beams": 4, "pad_token_id": pad, "length_penalty": 1.0,
        "no_repeat_ngram_size": 0}, indent=2))
    return folder


def fairseq_spm(lines: list[str], vocab_size: int) -> bytes:
    """A BPE SentencePiece model laid out as fairseq's are: ``<unk>`` 0, ``<s>`` 1, ``</s>`` 2."""
    import sentencepiece

    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=model, vocab_size=vocab_size,
                                             model_type="bpe", character_coverage=1.0, unk_id=0, bos_id=1, eos_id=2,
                                             pad_id=-1, hard_vocab_limit=False, num_threads=1, minloglevel=2)
    return model.getvalue()


def write_fairseq_folder(folder: Path, family: str = "nllb", *, d_model: int = 32, layers: int = 2, heads: int = 4,
                         ffn: int = 64, seed: int = 0, entries: int = 0) -> Path:
    """A random NLLB-200 ("nllb"), M2M100 ("m2m100") or mBART-50 ("mbart50") folder as the Hub lays it out:
    config.json, model.safetensors, sentencepiece.bpe.model, tokenizer_config.json and, for M2M100, vocab.json;
    ``entries``: at least this many entries (fairseq's filler entries after the real ones: NLLB-200's 256,206)."""
    from attnviz.engine.text.language_codes import M2M100_CODES, MBART50_CODES, NLLB_CODES

    torch.manual_seed(seed)
    proto = fairseq_spm(synthetic_lines(seed) + synthetic_lines(seed + 1), 80)
    import sentencepiece

    sp = sentencepiece.SentencePieceProcessor()
    sp.LoadFromSerializedProto(proto)
    pieces = [sp.id_to_piece(i) for i in range(3, sp.get_piece_size())]
    folder.mkdir(parents=True, exist_ok=True)
    settings: dict = {"tokenizer_class": {"nllb": "NllbTokenizer", "m2m100": "M2M100Tokenizer",
                                          "mbart50": "MBart50Tokenizer"}[family]}
    if family == "m2m100":
        vocab = {p: i for i, p in enumerate(["<s>", "<pad>", "</s>", "<unk>", *pieces])}
        (folder / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
        size = len(vocab) + len(M2M100_CODES) + 8
    else:
        size = 4 + len(pieces) + len(NLLB_CODES if family == "nllb" else MBART50_CODES) + 1
    size = max(size, entries)
    tensors = marian_tensors(size, d_model, layers, ffn)
    for side in ("encoder", "decoder"):
        names = ["layer_norm"] + (["layernorm_embedding"] if family == "mbart50" else [])
        tensors |= {f"model.{side}.{n}.{p}": 1 + 0.1 * torch.randn(d_model) for n in names for p in ("weight", "bias")}
        if family == "mbart50":
            tensors[f"model.{side}.embed_positions.weight"] = 0.1 * torch.randn(64 + 2, d_model)
    if family != "mbart50":
        del tensors["final_logits_bias"]
    config = {"model_type": "mbart" if family == "mbart50" else "m2m_100", "d_model": d_model,
              "encoder_layers": layers, "decoder_layers": layers, "encoder_attention_heads": heads,
              "decoder_attention_heads": heads, "encoder_ffn_dim": ffn, "decoder_ffn_dim": ffn,
              "max_position_embeddings": 64, "activation_function": "gelu" if family == "mbart50" else "relu",
              "scale_embedding": True, "vocab_size": size, "pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2,
              "decoder_start_token_id": 2, "tie_word_embeddings": True}
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    (folder / "sentencepiece.bpe.model").write_bytes(proto)
    (folder / "tokenizer_config.json").write_text(json.dumps(settings))
    return folder


CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
          "'<|im_end|>\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


def write_llm_folder(folder: Path, *, d_model: int = 32, layers: int = 2, heads: int = 4, ffn: int = 48) -> Path:
    """A random Qwen2-shaped decoder-only folder as the Hub lays it out: config.json, generation_config.json,
    model.safetensors under the folder's own names, a byte-level BPE tokenizer.json trained here and a
    tokenizer_config.json with a ChatML template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    from attnviz.engine.hub.llm_config import model_config
    from attnviz.engine.hub.llm_files import weight_names

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer, tokenizer.decoder = pre_tokenizers.ByteLevel(add_prefix_space=False), decoders.ByteLevel()
    tokenizer.train_from_iterator(synthetic_lines(3), trainers.BpeTrainer(
        vocab_size=320, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    vocab = tokenizer.get_vocab_size()
    config = {"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "vocab_size": vocab, "hidden_size": d_model,
              "intermediate_size": ffn, "num_hidden_layers": layers, "num_attention_heads": heads,
              "num_key_value_heads": heads // 2, "max_position_embeddings": 256, "rms_norm_eps": 1e-6,
              "rope_theta": 10000.0, "tie_word_embeddings": False, "hidden_act": "silu", "eos_token_id": 2}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "generation_config.json").write_text(json.dumps({"eos_token_id": [2, 0], "max_new_tokens": 8}))
    tokenizer.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": CHATML, "eos_token": "<|im_end|>"}))
    generator = torch.Generator().manual_seed(0)
    shapes = weight_names(model_config(folder / "config.json", config, [2, 0]))
    save_file({name: torch.randn(shape, generator=generator) * 0.2 for name, shape in shapes.items()},
              str(folder / "model.safetensors"))
    return folder


SAMPLES: dict[str, Callable[[Path], Path]] = {
    "hf-llm": write_llm_folder,
    "hf-marian": write_marian_folder,
    "hf-m2m100": lambda folder: write_fairseq_folder(folder, "nllb"),
    "hf-m2m100/m2m100": lambda folder: write_fairseq_folder(folder, "m2m100"),
    "hf-mbart": lambda folder: write_fairseq_folder(folder, "mbart50"),
}
