"""``Linear``: ``nn.Linear`` computing at its input's precision. A half-precision model fed float32 (an attribution's
exact pass: ``IncrementalModel.computes_at_input_precision``) multiplies by its weights upcast, a transient copy
per call, so bfloat16 storage keeps float32 arithmetic; fed its own precision, it is ``nn.Linear`` itself. Its
state is ``nn.Linear``'s (``weight``, ``bias``), so checkpoints and folders name it the same."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn


class Linear(nn.Linear):
    def forward(self, x: Tensor) -> Tensor:
        weight: Tensor = self.weight
        bias: Tensor | None = self.bias
        if weight.dtype != x.dtype:
            weight = weight.to(x.dtype)
            bias = None if bias is None else bias.to(x.dtype)
        return F.linear(x, weight, bias)
