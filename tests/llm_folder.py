"""Tiny random decoder-only LLM folders of every family attnviz opens, laid out as the Hugging Face Hub lays them out,
built with ``transformers`` (the test-only extra) and a byte-level BPE ``tokenizer.json`` trained here on a few
hundred made-up lines; each family gets its chat-template style (ChatML, Llama 3 headers, Gemma turns). Nothing is
downloaded."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

transformers = pytest.importorskip("transformers")

WORDS = ("der die das ein eine Mann Frau Hund Katze sieht läuft schnell langsam über Straße Haus rot blau "
         "the a man woman dog cat sees runs quickly slowly over street house red blue le la un une homme femme "
         "chien chat voit court vite rue maison rouge bleu Translate following text from German into English French")
CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
          "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
LLAMA3 = ("{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + "
          "'<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}")
GEMMA = ("{{ bos_token }}{% for message in messages %}{{ '<start_of_turn>' + ('model' if message['role'] == "
         "'assistant' else message['role']) + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}{% endfor %}"
         "{% if add_generation_prompt %}{{'<start_of_turn>model\\n'}}{% endif %}")
STYLES = {  # template, specials (pad, bos, end tokens...), bos, end tokens
    "chatml": (CHATML, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], None, ["<|im_end|>", "<|endoftext|>"]),
    "llama3": (LLAMA3, ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                        "<|eot_id|>", "<|eom_id|>"], "<|begin_of_text|>", ["<|end_of_text|>", "<|eom_id|>",
                                                                            "<|eot_id|>"]),
    "gemma": (GEMMA, ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"], "<bos>",
              ["<eos>", "<end_of_turn>"]),
}
FAMILIES = {  # name -> (config class, model class, style, extra config)
    "llama": ("LlamaConfig", "LlamaForCausalLM", "llama3",
              dict(rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                 "original_max_position_embeddings": 16}, attention_bias=True)),
    "mistral": ("MistralConfig", "MistralForCausalLM", "llama3", dict(sliding_window=6)),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", "chatml", dict(tie_word_embeddings=True)),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", "chatml", dict(head_dim=16)),
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", "gemma", dict(head_dim=16, sliding_window=6,
                                                                  query_pre_attn_scalar=12)),
    "gemma3": ("Gemma3TextConfig", "Gemma3ForCausalLM", "gemma",
               dict(head_dim=16, sliding_window=6, rope_local_base_freq=100.0,
                    layer_types=["sliding_attention", "full_attention", "sliding_attention"])),
}


def corpus(lines: int = 400, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    words = WORDS.split()
    return [" ".join(rng.choice(words) for _ in range(rng.randint(3, 12))) + rng.choice([".", "!", "?", ":"])
            for _ in range(lines)]


def train_tokenizer(style: str):
    """A byte-level BPE tokenizer with the style's special tokens, trained on ``corpus()``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    _, specials, bos, _ = STYLES[style]
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(corpus(), trainer)
    if bos is not None:
        tokenizer.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", special_tokens=[(bos, tokenizer.token_to_id(bos))])
    return tokenizer


def make_llm_folder(root: Path, family: str, seed: int = 0, template: bool = True, dtype: str = "float32",
                    shards: bool = False, overrides: dict | None = None) -> Path:
    """A random ``family`` model with its tokenizer and template, saved as the Hub lays a folder out; ``overrides``
    replace the family's extra config fields (None: the config class's default)."""
    import torch

    config_class, model_class, style, extra = FAMILIES[family]
    extra = {k: v for k, v in (extra | (overrides or {})).items() if v is not None}
    tokenizer = train_tokenizer(style)
    template_text, _, bos, ends = STYLES[style]
    end_ids = [tokenizer.token_to_id(t) for t in ends]
    pad = tokenizer.token_to_id("<pad>") if style == "gemma" else None
    config = getattr(transformers, config_class)(
        vocab_size=tokenizer.get_vocab_size(), hidden_size=32, intermediate_size=48, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256, eos_token_id=end_ids,
        bos_token_id=tokenizer.token_to_id(bos) if bos else None, pad_token_id=pad, **extra)
    torch.manual_seed(seed)
    model = getattr(transformers, model_class)(config).eval()
    with torch.no_grad():  # random weights a little larger than the initialiser's, so tokens differ clearly
        for p in model.parameters():
            p.mul_(3.0) if p.dim() > 1 else None
    folder = root / f"{family}-tiny"
    model.to(getattr(torch, dtype)).save_pretrained(folder, max_shard_size="60KB" if shards else "5GB")
    model.generation_config.max_new_tokens = 12
    model.generation_config.save_pretrained(folder)
    tokenizer.save(str(folder / "tokenizer.json"))
    tok_config = {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": ends[0], "model_max_length": 256}
    if bos:
        tok_config["bos_token"] = bos
    if pad is not None:
        tok_config["pad_token"] = "<pad>"
    if template:
        tok_config["chat_template"] = template_text
    (folder / "tokenizer_config.json").write_text(json.dumps(tok_config))
    return folder
