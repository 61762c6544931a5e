"""Reading an imported folder's weights file, held to the checkpoint's standard: safetensors, or a PyTorch ``.bin``
through ``torch.load(weights_only=True)``, which refuses every pickled object but tensors (nothing runs); names and
shapes against the folder's ``WeightPlan``, every value finite. Every folder format reads its weights here.
"""

from __future__ import annotations

import pickle
from collections.abc import Collection
from pathlib import Path

import torch

from attnviz.engine.checkpoints.folder import FOLDER_FILE, WeightPlan, check_shapes, check_weight_file
from attnviz.engine.checkpoints.header import read_index
from attnviz.engine.checkpoints.mapped import map_tensors
from attnviz.engine.checkpoints.schema import open_regular
from attnviz.engine.checkpoints.store import check_finite
from attnviz.engine.errors import CheckpointError

PICKLE_REFUSED = ("holds Python objects besides tensors, and unpickling them could run any code, so attnviz refuses "
                  "it. Convert it to model.safetensors with a tool you trust (for example transformers' "
                  "save_pretrained(safe_serialization=True), on a machine where running the file's code is safe), "
                  "put that file in the folder instead, and open it again.")


def _read_bin(path: Path) -> object:
    """A ``.bin``'s tensors; the refusal never repeats torch's own text, which advises turning the safety off."""
    try:
        with open_regular(path, FOLDER_FILE) as f:
            return torch.load(f, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:  # what weights_only raises for any object it will not build
        raise CheckpointError(f"{path} {PICKLE_REFUSED}") from None
    except CheckpointError:
        raise
    except Exception as exc:  # a damaged zip, a cut-off file: torch raises its own types
        raise CheckpointError(f"{path} cannot be read as PyTorch weights ({type(exc).__name__}); the file is "
                              "damaged: download the model folder again.") from None


def read_weights(plan: WeightPlan, copied: Collection[str] = ()) -> dict[str, torch.Tensor]:
    """The weights ``plan`` names at their stored dtype, checked before they are used; a safetensors file's are
    views of the mapped file (``engine.checkpoints.mapped``), read as they are touched; ``copied``: the tables the
    caller only copies (``map_tensors``)."""
    path = plan.path
    if path.suffix == ".safetensors":
        check_weight_file(plan)  # framing, offsets and shapes from the header, before the data is read
        weights: object = map_tensors(path, read_index(path)[1], FOLDER_FILE, copied, exact=False)
    else:
        weights = _read_bin(path)
    if not isinstance(weights, dict) or not all(isinstance(k, str) and isinstance(v, torch.Tensor)
                                                for k, v in weights.items()):
        raise CheckpointError(f"{path} does not hold a flat dictionary of named tensors; it is not a model's weights "
                              "file: download the model folder again.")
    tensors = {k.removeprefix("module."): v for k, v in weights.items()}  # a DataParallel save prefixes "module."
    check_shapes(plan, {k: list(v.shape) for k, v in tensors.items()})
    check_finite(path, tensors, "(the file was damaged or the model diverged): download the model folder again.")
    return tensors
