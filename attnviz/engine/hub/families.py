"""The model families of Hugging Face folders that attnviz does not implement, named so a message can say what such a
folder holds: "a T5-family encoder-decoder (T5, mT5, MADLAD-400)", "a decoder-only language model (LLaMA)". Read
from ``config.json``'s ``model_type`` and ``architectures``; registers no format (torch-free, no files read here)."""

from __future__ import annotations

from typing import Any

# model_type -> the family in words (the encoder-decoder families people meet beside MarianMT and NLLB)
ENCODER_DECODER = {"t5": "T5-family encoder-decoder (T5, MADLAD-400)", "mt5": "T5-family encoder-decoder (mT5)",
                   "umt5": "T5-family encoder-decoder (umT5)", "longt5": "T5-family encoder-decoder (LongT5)",
                   "bart": "BART encoder-decoder", "fsmt": "FSMT (fairseq WMT19) encoder-decoder",
                   "pegasus": "Pegasus encoder-decoder", "prophetnet": "ProphetNet encoder-decoder",
                   "seamless_m4t": "SeamlessM4T speech/text translation", "whisper": "Whisper speech recogniser"}
# model_type -> its name, for decoder-only language models (any config whose architectures end in ForCausalLM is one)
DECODER_ONLY = {"llama": "LLaMA", "mistral": "Mistral", "mixtral": "Mixtral", "gpt2": "GPT-2", "gptj": "GPT-J",
                "gpt_neox": "GPT-NeoX", "qwen2": "Qwen2", "qwen3": "Qwen3", "gemma": "Gemma", "gemma2": "Gemma 2",
                "gemma3": "Gemma 3", "phi": "Phi", "phi3": "Phi-3", "falcon": "Falcon", "bloom": "BLOOM", "opt": "OPT"}


def family(model_type: Any, architectures: Any = None) -> str | None:
    """The family a folder's config names, in words, when it is one attnviz knows of; None otherwise."""
    names = [a for a in architectures if isinstance(a, str)] if isinstance(architectures, list) else []
    if not isinstance(model_type, str):
        return None
    if model_type in ENCODER_DECODER:
        return f"a {ENCODER_DECODER[model_type]} model"
    if model_type in DECODER_ONLY or any(a.endswith("ForCausalLM") for a in names):
        return f"a decoder-only language model ({DECODER_ONLY.get(model_type, model_type)})"
    return None


def holds(model_type: Any, architectures: Any = None) -> str:
    """What a folder whose config.json gives this model_type (and architectures) holds, in words."""
    named = family(model_type, architectures)
    where = f"config.json model_type {model_type!r:.40}" if named else "config.json model_type"
    return f"holds {named} ({where})" if named else f"holds a {model_type or 'unknown'!r:.40} model ({where})"
