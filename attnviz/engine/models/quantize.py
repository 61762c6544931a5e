"""Reduced precision for translating many sentences: int8 linear layers (dynamic quantisation), opt-in.

``quantize_int8`` replaces every ``nn.Linear`` of a network (attention projections, feed-forward, the output
projection) with torch's dynamically quantised one: weights stored as int8 with one scale per output row, activations
quantised per call, products accumulated in int32. Embeddings, layer norms and the attention itself (the explicit
softmax the maps come from) stay float32, so captured attention is the int8 network's own, computed the usual
way from int8-projected queries and keys. It runs on the CPU (fbgemm/x86 or qnnpack kernels) and needs float32
weights; anything else is refused with one line (``InputError``).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnviz.engine.errors import InputError

ENGINES = ("x86", "fbgemm", "qnnpack")  # torch's int8 kernels, preferred first


def _engine() -> str:
    supported = torch.backends.quantized.supported_engines
    if torch.backends.quantized.engine in ENGINES:
        return torch.backends.quantized.engine
    for name in ENGINES:
        if name in supported:
            return name
    raise InputError(f"--int8 needs torch's int8 kernels (fbgemm, x86 or qnnpack); this torch build has "
                     f"{', '.join(supported) or 'none'}. Translate without --int8")


def quantize_int8(model: nn.Module) -> nn.Module:
    """Quantise ``model``'s linear layers to int8, in place; returns it (in eval mode: int8 layers do not train)."""
    weights = [p for p in model.parameters()]
    if any(p.device.type != "cpu" for p in weights):
        raise InputError("--int8 runs on the CPU only; this model was loaded on another device")
    other = sorted({str(p.dtype).removeprefix("torch.") for p in weights if p.dtype != torch.float32})
    if other:
        raise InputError(f"--int8 quantises float32 weights; this model is loaded in {', '.join(other)}. Load it in "
                         "float32 (drop --dtype) to use --int8")
    _check_quantisable(model)
    torch.backends.quantized.engine = _engine()
    model.eval()
    with warnings.catch_warnings():  # torch 2.13 flags torch.ao.quantization (moving to torchao, not installed) and
        warnings.simplefilter("ignore", UserWarning)  # its quantised tensors as deprecated: notices for torch's
        warnings.simplefilter("ignore", DeprecationWarning)  # developers that would reach every user here
        from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic  # only when asked for

        quantize_dynamic(model, {nn.Linear: per_channel_dynamic_qconfig}, inplace=True)
    return model


def _check_quantisable(model: nn.Module) -> None:
    """Refuse, in one line, a linear layer whose weights int8 cannot represent: the quantiser divides each row's range
    (max - min) into 255 steps, which is inf when the weights are finite but huge (scaled to 1e38) or not finite."""
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear):
            w = module.weight.detach()
            span = w.amax(dim=1) - w.amin(dim=1) if w.numel() else w.new_zeros(1)
            if not bool(torch.isfinite(span).all()):
                largest = float(w.abs().max())
                raise InputError(f"--int8 cannot quantise {name}: its weights reach {largest:.3g}, a range no int8 "
                                 "scale can hold (overflowing or damaged weights). Check the model's weights")


def is_int8(model: nn.Module) -> bool:
    """Whether ``quantize_int8`` ran on ``model``."""
    return any(isinstance(m, torch.ao.nn.quantized.dynamic.Linear) for m in model.modules())


def quantized_layers(model: nn.Module) -> list[str]:
    """The names of ``model``'s int8 linear layers (empty before ``quantize_int8``)."""
    return [name for name, m in model.named_modules() if isinstance(m, torch.ao.nn.quantized.dynamic.Linear)]


def int8_summary(model: nn.Module) -> str | None:
    """Which of ``model``'s layers run in int8, in words (None when none do), for the model's card and info."""
    names = quantized_layers(model)
    if not names:
        return None
    leaves = sorted({"feed-forward" if leaf.isdigit() else leaf  # an nn.Sequential's layers are numbered
                     for leaf in (name.rsplit(".", 1)[-1] for name in names if "." in name)})
    top = sorted(name for name in names if "." not in name)  # the output projection (out_proj, lm_head)
    said = f"{len(names)} linear layers in int8: {', '.join(leaves)} in every layer"
    if top:
        said += f", and the output projection ({', '.join(top)})"
    return said + "; embeddings, norms and the attention softmax stay float32"


def rows_of(proj: nn.Module, ids: Tensor) -> Callable[[Tensor], Tensor] | None:
    """A projection onto the output rows ``ids`` of a linear layer ``proj`` (float or int8): only those rows are
    computed, each as the whole layer computes it. None for any other module."""
    if type(proj) is nn.Linear:
        weight = proj.weight.index_select(0, ids)
        bias = None if proj.bias is None else proj.bias.index_select(0, ids)
        return lambda hidden: F.linear(hidden, weight, bias)
    if isinstance(proj, torch.ao.nn.quantized.dynamic.Linear):
        q = proj.weight()  # per output row: int8 values, a scale and a zero point
        rows = torch._make_per_channel_quantized_tensor(q.int_repr().index_select(0, ids),
                                                        q.q_per_channel_scales().index_select(0, ids),
                                                        q.q_per_channel_zero_points().index_select(0, ids), 0)
        small = torch.ao.nn.quantized.dynamic.Linear(proj.in_features, ids.numel(), dtype=torch.qint8)
        bias = proj.bias()
        small.set_weight_bias(rows, None if bias is None else bias.index_select(0, ids))
        return small
    return None
