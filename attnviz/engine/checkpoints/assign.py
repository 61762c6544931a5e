"""Building a network straight from loaded tensors: the one function every loader (checkpoint files, each folder
format in ``engine.hub``) calls, so none initialises weights that loading then overwrites.

``build_loaded(path, cfg, state, dtype)`` builds the config's network on torch's meta device (no memory, no random
initialisation: before, that took two thirds of opening a MarianMT folder), checks that ``state`` holds every tensor
the network stores (``stored_state``'s names, tied weights once) at its shape, and assigns the tensors themselves
as the parameters (``load_state_dict(assign=True)``: a mapped file's tensors are used in place, at ``dtype``, so
float32 weights are never copied). Weights tied by the network's constructor (a shared embedding, an output
projection tied to it) are tied again to the one assigned tensor. Buffers no file holds (sinusoid position tables)
are computed by the module that owns them, through its ``compute_buffers()`` method; a parameter or buffer still on
the meta device afterwards is a loader's fault, refused with its name. At half precision the network runs one
token through encoder and decoder first, so an operation the CPU cannot run at that dtype is said at loading, not
mid-translation; at every precision that token's output must be finite, so weights whose arithmetic overflows
(finite, but scaled to 1e38) are refused at loading rather than translated into an empty or <unk> output.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from itertools import chain

import torch
from torch import Tensor, nn

from attnviz.engine.checkpoints.store import meta_model
from attnviz.engine.config import ModelConfig
from attnviz.engine.errors import CheckpointError
from attnviz.engine.kinds import kind_of
from attnviz.engine.models.protocol import IncrementalModel, stored_state

TORCH_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def tied_aliases(model: nn.Module) -> dict[str, str]:
    """Each second name of a parameter (a tied weight) -> the name it is stored under (its first)."""
    first: dict[int, str] = {}
    aliases = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        if id(param) in first:
            aliases[name] = first[id(param)]
        else:
            first[id(param)] = name
    return aliases


def _retie(model: nn.Module, aliases: Mapping[str, str]) -> None:
    for alias, primary in aliases.items():
        owner, _, leaf = alias.rpartition(".")
        setattr(model.get_submodule(owner), leaf, model.get_parameter(primary))


def _matching(path: str | os.PathLike[str], expected: Mapping[str, Tensor], state: Mapping[str, Tensor],
              dtype: torch.dtype) -> dict[str, Tensor]:
    """``state``'s tensors under ``expected``'s names, floating ones at ``dtype``; a missing or misshapen one is a
    loader's mapping fault (the weights' index was checked before), said plainly."""
    out = {}
    for name, meta in expected.items():
        tensor = state.get(name)
        if tensor is None or tensor.shape != meta.shape:
            got = "nothing" if tensor is None else list(tensor.shape)
            raise CheckpointError(f"{path}: {name} should have shape {list(meta.shape)} by the model's settings but "
                                  f"the weights give {got}.")
        if not tensor.is_floating_point():
            if meta.is_floating_point():  # an integer or boolean tensor where a weight is expected
                raise CheckpointError(f"{path}: {name} is stored as {str(tensor.dtype)[6:]}, but it is a weight and "
                                      "must be floating point (float32, float16 or bfloat16); the file is not a "
                                      "model's weights, or was written wrongly.")
            out[name] = tensor
            continue
        out[name] = tensor.to(dtype)
        narrowed = out[name].element_size() < tensor.element_size() or dtype == torch.float16
        if narrowed and tensor.dtype != dtype and not bool(torch.isfinite(out[name]).all()):
            raise CheckpointError(f"{path}: {name} holds values beyond the range of {str(dtype)[6:]}; load the "
                                  "model at float32 (--dtype float32).")
    return out


def build_loaded(path: str | os.PathLike[str], cfg: ModelConfig, state: Mapping[str, Tensor],
                 dtype: str = "float32") -> IncrementalModel:
    """``cfg``'s network holding ``state`` (named as ``stored_state`` names them; extra names are ignored, such as
    the tied copies a format maps too) at ``dtype``, in eval mode, nothing initialised (see the module's
    docstring)."""
    model: IncrementalModel = meta_model(kind_of(cfg).build, cfg)
    aliases = tied_aliases(model)
    model.load_state_dict(_matching(path, stored_state(model), state, TORCH_DTYPES[dtype]), strict=False,
                          assign=True)
    _retie(model, aliases)
    for module in model.modules():
        compute = getattr(module, "compute_buffers", None)
        if callable(compute):
            compute()
    left = [name for name, t in chain(model.named_parameters(), model.named_buffers()) if t.is_meta]
    if left:
        raise CheckpointError(f"{path}: {', '.join(left[:3])} were not loaded or computed (a fault in attnviz's "
                              "reader of this model); report it, with the model's files.")
    model.eval()
    _probe(path, model, dtype)
    return model


def _probe(path: str | os.PathLike[str], model: IncrementalModel, dtype: str) -> None:
    """Run one token through the network at ``dtype``: refuse with one line if the CPU cannot, or if its output is
    not a number (finite weights so large that the arithmetic overflows, such as weights scaled to 1e38)."""
    try:
        with torch.inference_mode():
            cache = model.start(model.encode(torch.tensor([[1, 2]]), need_weights=True))
            logits = model.step(torch.tensor([1]), cache, need_weights=True)[0]
    except (RuntimeError, NotImplementedError) as exc:
        reason = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
        raise CheckpointError(f"{path}: this {kind_of(model.cfg).title} cannot run at {dtype} on this machine "
                              f"({reason}); load it at float32 (--dtype float32).") from None
    if not bool(torch.isfinite(logits).all()):
        largest = max(float(p.detach().abs().max()) for p in model.parameters() if p.numel())
        raise CheckpointError(f"{path}: the network's output overflows at {dtype} (inf or NaN for a one-token "
                              f"input); its weights reach {largest:.3g}, too large to compute with. The weights "
                              "are damaged or wrongly scaled.")
