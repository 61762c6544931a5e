"""A bare-torch floor for greedy decoding with an attnviz Transformer checkpoint, for ``bench_peers``.

``floor_decode`` runs the same matmuls as ``Translator.steps`` with full capture, on the same weights as plain
tensors and no modules: one token per step, cross-attention keys/values computed once, self-attention keys/values
written into a preallocated buffer, explicit softmax weights (what capture needs) and argmax. It produces no events,
top-k lists or entropies, so ``floor_figures`` says what attnviz's step costs above the arithmetic itself; the
floor's tokens are checked against attnviz's, so a floor that computed something else would show.
"""

from __future__ import annotations

import math
import statistics
import time

import torch
import torch.nn.functional as F
from torch import Tensor

from attnviz.engine.config import DecodeConfig
from attnviz.engine.events import DecodeStep
from attnviz.engine.loading import load_translator
from attnviz.engine.text.vocab import EOS_ID, PAD_ID, SOS_ID

ACT = {"relu": F.relu, "gelu": F.gelu, "swish": F.silu, "gelu_new": lambda x: F.gelu(x, approximate="tanh")}
SENTENCE = "Ein kleines Mädchen in einem rosa Kleid klettert eine Treppe zu einem Spielhaus hinauf ."


def _attend(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    """[H, 1, dh] against [H, t, dh]: explicit softmax weights, then their values [1, H * dh]."""
    weights = (q @ k.transpose(-1, -2) / math.sqrt(q.size(-1))).softmax(-1)
    return (weights @ v).transpose(0, 1).reshape(1, -1)


def floor_decode(model, src: Tensor, steps: int) -> list[int]:
    """Greedy ids for ``src`` [1, S] over exactly ``steps`` steps (``<pad>``/``<sos>`` ruled out, as search does)."""
    cfg, w = model.cfg, {k: v.detach() for k, v in model.state_dict().items()}
    heads, d, post = cfg.heads, cfg.d_model, cfg.norm != "pre"
    act = ACT[cfg.activation]

    def lin(x: Tensor, name: str) -> Tensor:
        return F.linear(x, w[f"{name}.weight"], w.get(f"{name}.bias"))

    def norm(x: Tensor, name: str) -> Tensor:
        return F.layer_norm(x, (d,), w[f"{name}.weight"], w[f"{name}.bias"], cfg.ln_eps)

    def split(x: Tensor) -> Tensor:
        return x.view(-1, heads, d // heads).transpose(0, 1)  # [T, D] -> [H, T, dh]

    memory = model.encode(src).memory[0]  # the same encoder pass; the floor is the decoder's
    layers = [f"decoder.{i}" for i in range(cfg.dec_layers)]
    cross = [(split(lin(memory, f"{p}.cross_attn.k_proj")), split(lin(memory, f"{p}.cross_attn.v_proj")))
             for p in layers]
    keys = torch.empty(len(layers), heads, steps, d // heads)
    values = torch.empty_like(keys)
    table = w.get("tgt_embed.positions.weight", getattr(model.tgt_embed, "table", None))
    scale, token, out = model.tgt_embed.scale, SOS_ID, []
    for t in range(steps):
        x = (w["tgt_embed.tokens.weight"][token] * scale + table[t])[None]  # [1, D]
        for i, p in enumerate(layers):
            h = x if post else norm(x, f"{p}.res_self.norm")  # pre-LN normalises the input, post-LN the sum
            keys[i, :, t] = lin(h, f"{p}.self_attn.k_proj").view(heads, -1)
            values[i, :, t] = lin(h, f"{p}.self_attn.v_proj").view(heads, -1)
            q = split(lin(h, f"{p}.self_attn.q_proj"))
            x = x + lin(_attend(q, keys[i, :, :t + 1], values[i, :, :t + 1]), f"{p}.self_attn.out_proj")
            x = norm(x, f"{p}.res_self.norm") if post else x
            h = x if post else norm(x, f"{p}.res_cross.norm")
            x = x + lin(_attend(split(lin(h, f"{p}.cross_attn.q_proj")), *cross[i]), f"{p}.cross_attn.out_proj")
            x = norm(x, f"{p}.res_cross.norm") if post else x
            h = x if post else norm(x, f"{p}.res_ff.norm")
            x = x + lin(act(lin(h, f"{p}.ff.0")), f"{p}.ff.3")
            x = norm(x, f"{p}.res_ff.norm") if post else x
        if not post:
            x = norm(x, "dec_norm")
        logits = lin(x, "out_proj")[0]
        logits[PAD_ID] = logits[SOS_ID] = float("-inf")
        token = int(logits.argmax())
        out.append(token)
    return out


def floor_figures(checkpoint: str, repeats: int) -> dict:
    """Milliseconds per greedy token, attnviz's steps with full capture vs the floor, medians interleaved."""
    translator = load_translator(checkpoint)
    model = translator.model
    src = torch.tensor([translator.prepare(SENTENCE).src_ids])
    decode = DecodeConfig(max_len=50)

    def ours() -> list[int]:
        return [e.token_id for e in translator.steps(SENTENCE, decode) if isinstance(e, DecodeStep)]

    tokens = ours()
    with torch.inference_mode():
        floor_tokens = floor_decode(model, src, len(tokens))
    times: dict[str, list[float]] = {"attnviz": [], "floor": []}
    for _ in range(repeats + 1):
        for name, run in (("attnviz", ours), ("floor", lambda: floor_decode(model, src, len(tokens)))):
            start = time.perf_counter()
            with torch.inference_mode():
                run()
            times[name].append((time.perf_counter() - start) * 1000 / len(tokens))
    ms = {name: round(statistics.median(t[1:]), 2) for name, t in times.items()}  # the first is a warm-up
    return {"model": checkpoint, "tokens": len(tokens), "floor_same_tokens": floor_tokens == tokens,
            "ended": tokens[-1] == EOS_ID, "ms_per_token": ms, "ratio": round(ms["attnviz"] / ms["floor"], 2)}
