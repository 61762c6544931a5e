"""Decoder-only LLMs shaped as Qwen2.5-0.5B, Llama-3.2-1B and Gemma-3-1B, with random weights, decoded step by step
with every attention map captured, by attnviz and by transformers (eager attention, ``output_attentions=True``),
each in a process of its own so that each peak resident memory is its own (``bench_decode.py --large NAME``).

The random folder is written once by transformers (``save_pretrained``, float32 unless ``--dtype``) into a cache
directory; both sides then load it from disk at ``--dtype``. One run: the prompt of ``SENTENCE`` in the folder's chat
template, ``tokens`` new tokens greedily (the end tokens are ones random weights do not reach first: both sides stop
at the same place, whose count is reported), ``repeats`` times after one warm-up; milliseconds to the first token
(the prompt's prefill and one step), per later token, and the process's peak RSS. transformers is the test-only
extra; attnviz itself never imports it.

``device`` ``cuda`` runs both sides on the GPU (attnviz's ``load_translator(..., device="cuda")``, transformers'
model and inputs ``.to("cuda")``), synchronising before every clock read, and reports each side's peak GPU memory
(``torch.cuda.max_memory_allocated``) beside its peak RSS, and the GPU's name.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SENTENCE = "Ein kleines Mädchen in einem rosa Kleid klettert eine Treppe zu einem Spielhaus hinauf."
CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
          "'<|im_end|>\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
# the generic fast tokenizer: a family's own class (Gemma's) would ask for pieces this trained tokenizer lacks
TOKENIZER_CONFIG = {"tokenizer_class": "PreTrainedTokenizerFast", "chat_template": CHATML, "eos_token": "<|im_end|>"}
SHAPES = {  # name -> (transformers config class, model class, config fields)
    "qwen2.5-0.5b": ("Qwen2Config", "Qwen2ForCausalLM", dict(
        hidden_size=896, num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2, intermediate_size=4864,
        vocab_size=151936, tie_word_embeddings=True, rope_theta=1000000.0, max_position_embeddings=32768)),
    "llama-3.2-1b": ("LlamaConfig", "LlamaForCausalLM", dict(
        hidden_size=2048, num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8, intermediate_size=8192,
        vocab_size=128256, tie_word_embeddings=True, head_dim=64, max_position_embeddings=131072,
        rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 8192}, rope_theta=500000.0)),
    "gemma-3-1b": ("Gemma3TextConfig", "Gemma3ForCausalLM", dict(
        hidden_size=1152, num_hidden_layers=26, num_attention_heads=4, num_key_value_heads=1, intermediate_size=6912,
        vocab_size=262144, head_dim=256, sliding_window=512, query_pre_attn_scalar=256, rope_theta=1000000.0,
        rope_local_base_freq=10000.0, max_position_embeddings=32768, tie_word_embeddings=True)),
    # issue 47's laptop size: 7.6B parameters, 15.2 GB in bfloat16 (built at --dtype directly: in float32 it would
    # take 30 GB to write)
    "qwen2.5-7b": ("Qwen2Config", "Qwen2ForCausalLM", dict(
        hidden_size=3584, num_hidden_layers=28, num_attention_heads=28, num_key_value_heads=4, intermediate_size=18944,
        vocab_size=152064, tie_word_embeddings=False, rope_theta=1000000.0, max_position_embeddings=32768)),
    "tiny": ("Qwen2Config", "Qwen2ForCausalLM", dict(  # the test suite's run of this benchmark, in seconds
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, intermediate_size=128,
        vocab_size=1000, tie_word_embeddings=True, max_position_embeddings=512)),
}


BUILT_AT_DTYPE = {"qwen2.5-7b"}  # shapes too large to build in float32 first


def write_folder(name: str, root: Path, dtype: str) -> Path:
    """The random ``name``-shaped folder under ``root`` (written once): weights, a byte-level BPE tokenizer trained
    on a few lines with ChatML specials, end tokens a random model does not reach first."""
    folder = root / f"{name}-random-{dtype}"
    if (folder / "tokenizer_config.json").exists():
        return folder
    import torch
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer, tokenizer.decoder = pre_tokenizers.ByteLevel(add_prefix_space=False), decoders.ByteLevel()
    lines = [SENTENCE, "A little girl in a pink dress climbs the stairs.", "Translate the following text."] * 50
    tokenizer.train_from_iterator(lines, trainers.BpeTrainer(
        vocab_size=600, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    config_name, model_name, fields = SHAPES[name]
    ends = [tokenizer.get_vocab_size() + 7]  # a row the tokenizer never names: random logits rarely pick it first
    config = getattr(transformers, config_name)(eos_token_id=ends, bos_token_id=None, pad_token_id=None, **fields)
    torch.manual_seed(0)
    if name in BUILT_AT_DTYPE:
        default = torch.get_default_dtype()
        torch.set_default_dtype(getattr(torch, dtype))
        try:
            model = getattr(transformers, model_name)(config).eval()
        finally:
            torch.set_default_dtype(default)
    else:
        model = getattr(transformers, model_name)(config).to(getattr(torch, dtype)).eval()
    model.save_pretrained(folder, max_shard_size="2GB")  # a shard is serialised whole: small ones keep the peak low
    del model
    tokenizer.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps(TOKENIZER_CONFIG))
    (folder / "generation_config.json").write_text(json.dumps({"eos_token_id": ends, "max_new_tokens": 64}))
    return folder


def clock(device: str) -> float:
    """``time.perf_counter()`` once the GPU has finished what it was given (on ``cuda``)."""
    if device == "cuda":
        import torch

        torch.cuda.synchronize()
    return time.perf_counter()


def _attnviz(folder: Path, dtype: str, tokens: int, repeats: int, device: str = "cpu") -> dict:
    from attnviz.engine.config import DecodeConfig
    from attnviz.engine.events import DecodeStep
    from attnviz.engine.loading import load_translator

    start = clock(device)
    translator = load_translator(folder, dtype, device)
    loaded = clock(device) - start
    decode = DecodeConfig(max_len=tokens)

    def once() -> tuple[float, float, int]:
        start = clock(device)
        first, count = 0.0, 0
        for event in translator.steps(SENTENCE, decode):
            if isinstance(event, DecodeStep):
                count += 1
                first = first or clock(device) - start
        return first, clock(device) - start, count

    return {"load_s": loaded, "runs": [once() for _ in range(repeats + 1)][1:],
            "prompt_tokens": len(translator.prompt(SENTENCE).ids)}


def _transformers(folder: Path, dtype: str, tokens: int, repeats: int, device: str = "cpu") -> dict:
    import torch
    import transformers

    start = clock(device)
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=getattr(torch, dtype),
                                                              attn_implementation="eager").eval().to(device)
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    loaded = clock(device) - start
    message = f"Translate the following text from German into English.\nGerman: {SENTENCE}\nEnglish:"
    text = tokenizer.apply_chat_template([{"role": "user", "content": message}], tokenize=False,
                                         add_generation_prompt=True)
    ids = torch.tensor([tokenizer(text, add_special_tokens=False)["input_ids"]], device=device)

    def generate(n: int) -> tuple[float, int]:
        start = clock(device)
        with torch.inference_mode():
            out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=n,
                                 output_attentions=True, return_dict_in_generate=True)
        return clock(device) - start, out.sequences.size(1) - ids.size(1)

    def once() -> tuple[float, float, int]:
        first, _ = generate(1)
        total, count = generate(tokens)
        return first, total, count

    return {"load_s": loaded, "runs": [once() for _ in range(repeats + 1)][1:], "prompt_tokens": ids.size(1)}


def child(side: str, folder: str, dtype: str, tokens: int, repeats: int, threads: int, device: str = "cpu") -> None:
    """One side's measurement, printed as JSON (run in a process of its own)."""
    import torch

    torch.set_num_threads(threads)
    measure = _attnviz if side == "attnviz" else _transformers
    result = measure(Path(folder), dtype, tokens, repeats, device)
    result["peak_rss_mib"] = peak_rss_mib()
    if device == "cuda":
        result["peak_gpu_mib"] = torch.cuda.max_memory_allocated() / 2**20
    print(json.dumps(result))


def device_figures(device: str) -> dict:
    """The device both sides ran on, and the GPU's name and torch's CUDA version on ``cuda``."""
    if device != "cuda":
        return {"device": device}
    import torch

    return {"device": device, "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
            "cuda": torch.version.cuda}


def peak_rss_mib() -> float:
    """This process's own peak resident memory: /proc's VmHWM belongs to the process image exec made, whereas
    ru_maxrss starts from the parent's at the fork (here the parent that wrote a multi-GB folder)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _summary(result: dict) -> dict:
    firsts = [r[0] * 1000 for r in result["runs"]]
    per_token = [(total - first) * 1000 / max(count - 1, 1) for first, total, count in result["runs"]]
    return {"first_token_ms": round(statistics.median(firsts), 1),
            "ms_per_token": round(statistics.median(per_token), 1), "tokens": result["runs"][0][2],
            "prompt_tokens": result["prompt_tokens"],
            "peak_rss_mib": round(result["peak_rss_mib"]), "load_s": round(result["load_s"], 1),
            **({"peak_gpu_mib": round(result["peak_gpu_mib"])} if "peak_gpu_mib" in result else {})}


def large_llm_figures(name: str, tokens: int, repeats: int, threads: int, dtype: str = "float32",
                      device: str = "cpu") -> dict:
    """Both sides on the ``name``-shaped random folder, each in its own process, on ``device``, and the ratios."""
    root = Path(os.environ.get("ATTNVIZ_BENCH_CACHE", Path(tempfile.gettempdir()) / "attnviz-bench"))
    root.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    folder = write_folder(name, root, dtype)
    written = time.perf_counter() - start
    sides = {}
    for side in ("attnviz", "transformers"):
        code = ("import sys; sys.path.insert(0, sys.argv[1]); from llm_large import child; "
                "child(*sys.argv[2:4], sys.argv[4], *map(int, sys.argv[5:8]), sys.argv[8])")
        out = subprocess.run([sys.executable, "-c", code, str(Path(__file__).parent), side, str(folder), dtype,
                              str(tokens), str(repeats), str(threads), device], capture_output=True, text=True)
        if out.returncode:
            raise SystemExit(f"{side} failed:\n{out.stderr[-3000:]}")
        sides[side] = _summary(json.loads(out.stdout.strip().splitlines()[-1]))
    ours, theirs = sides["attnviz"], sides["transformers"]
    ratios = {key: round(ours[key] / theirs[key], 3) for key in ("ms_per_token", "first_token_ms", "peak_rss_mib",
                                                                  "peak_gpu_mib") if key in ours and theirs.get(key)}
    return {"model": f"{name}-shaped, random weights ({dtype})", **device_figures(device),
            "folder_written_s": round(written, 1),
            "attnviz": ours, "transformers_eager_output_attentions": theirs, "attnviz_over_transformers": ratios,
            "load_average": os.getloadavg()}
