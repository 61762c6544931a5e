"""What search and training need from a model, whatever its kind: the typed protocol and its shared pieces.

``SearchModel`` is the contract (``encode`` / ``start`` / ``step`` / ``decode`` / ``project`` and the length
limits); ``IncrementalModel`` is the convenient base class that writes ``step`` once on top of ``decode`` and
``project``. ``Encoded`` and ``Decoded`` are what those calls return. A kind's network subclasses
``IncrementalModel`` (or satisfies ``SearchModel`` on its own); a kind in ``attnviz.engine.kinds`` builds it and
passes what the network needs to know beyond the config (whether it reads a source). Search and training take a
``SearchModel``, not any ``nn.Module``. Names: B batch, H heads, L layers, S source length, T target length, D model
width.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol, Self, runtime_checkable

import torch
from torch import Tensor, nn

from attnviz.engine.config import ModelConfig
from attnviz.engine.models.probes import ProbeBoard, ProbeError

FEW_ROWS = 8  # rows a step projects weight-major (``project_rows``): up to 8 it is faster than ``project``


@dataclass
class Encoded:
    memory: Tensor  # [B, S, D]
    mask: Tensor  # [B, 1, 1, S], True at real (non-pad) source tokens
    attention: list[Tensor] = field(default_factory=list)  # per layer [B, H, S, S] when asked


@dataclass
class Decoded:
    hidden: Tensor  # [B, T, D]
    self_attention: list[Tensor]  # per layer [B, H, T, t]; empty when the model has none
    cross_attention: list[Tensor]  # per layer [B, H, T, S]; empty when the model has none

    def last_rows(self) -> tuple[Tensor | None, Tensor | None]:
        """The last query's attention of every layer: [B, L, H, t] (decoder self) and [B, L, H, S] (cross)."""
        def rows(weights: list[Tensor]) -> Tensor | None:
            # L x [B, H, t] -> [B, L, H, t]
            return torch.stack([w[:, :, -1] for w in weights], dim=1) if weights else None

        return rows(self.self_attention), rows(self.cross_attention)


@dataclass(frozen=True)
class BlockNorm:
    """A LayerNorm or RMSNorm after an attention block: z -> gain * (z - mean(z)) / sqrt(var(z) + eps) + bias
    (``centred``, LayerNorm) or gain * z / sqrt(mean(z^2) + eps) (RMSNorm, no bias). Once the scale of the whole
    sum is fixed it is linear, which is how mixing analyses take each term through it."""

    gain: Tensor  # [D] the factor the normalised vector is multiplied by
    bias: Tensor | None  # [D]
    eps: float
    centred: bool


@dataclass(frozen=True)
class AttentionBlock:
    """What a mixing analysis (ALTI+, norm-weighted attention, value zeroing) needs of one attention block beside
    what passes its probe points (the stream entering it, its value vectors, its weights, the stream leaving it):
    the output projection, the key/value head groups and the norm its output passes.

    ``norm_reads`` says where that norm sits: ``"sum"``, the residual sum (post-LN, ``LN(x + a)``); ``"block"``, the
    block's output before the residual adds it (Gemma's post-attention norm, ``x + N(a)``); ``"none"``, no norm after
    the block (pre-norm: the norm before it acts on each key's own input, inside that key's term)."""

    out_weight: Tensor  # [D, H * dh] (out_features, in_features)
    out_bias: Tensor | None  # [D]
    heads: int  # H query heads; query head h reads key/value head h // (H / G)
    kv_heads: int  # G (H: every head its own)
    norm: BlockNorm | None
    norm_reads: str  # "sum", "block" or "none"

    def __post_init__(self) -> None:
        if self.norm_reads not in ("sum", "block", "none") or (self.norm is None) != (self.norm_reads == "none"):
            raise ValueError(f"an attention block's norm reads 'sum', 'block' or 'none', not {self.norm_reads!r}")


class IncrementalModel(nn.Module):
    """The protocol search drives, shared by every model kind.

    A subclass provides ``encode(src, need_weights)``, ``start(encoded) -> cache``, ``decode(tgt, encoded,
    need_weights, cache)`` returning ``Decoded`` and ``project(hidden)``; ``step`` and the length limits are
    written once here. ``has_source`` is False for a language model (its kind says so when it builds it).
    ``probes`` names the points where a value may be read or replaced (``engine.models.probes``); a network made of
    Transformer layers also runs one layer alone (``run_layer``), describes its attention blocks
    (``attention_block``) and reads any layer's output through its last steps (``read_out``).
    """

    cfg: ModelConfig
    has_source: bool = True
    # the decoder's self-attention continues the encoder's positions through the same layers (a decoder-only LLM:
    # the prompt's pass, then the output steps): mixing analyses read the two passes as one stream
    one_stream: bool = False
    # the protocol calls this network answers beyond search (``offers``): of "attention_block", "run_layer",
    # "read_out"; the base class's raise ProbeError
    answers: frozenset[str] = frozenset()
    # fed embeddings at a higher precision than its weights (float32 into a bfloat16 model), it computes at theirs
    # (``models.linear.Linear``): an attribution of a half-precision model then takes float32 gradients
    computes_at_input_precision: bool = False
    probes: ProbeBoard

    def encode(self, src: Tensor, need_weights: bool = False) -> Encoded:
        raise NotImplementedError

    def start(self, enc: Any) -> Any:
        raise NotImplementedError

    def decode(self, tgt: Tensor, enc: Any, need_weights: bool = False, cache: Any = None) -> Decoded:
        raise NotImplementedError

    def project(self, hidden: Tensor) -> Tensor:
        raise NotImplementedError

    def project_rows(self, hidden: Tensor) -> Tensor:
        """Logits [N, V] of a step's few rows [N, D]; a kind may compute them faster than ``project``."""
        return self.project(hidden)

    def restricted(self, ids: Tensor) -> Callable[[Tensor], Tensor] | None:
        """A projection of hidden states [N, D] to the logits [N, K] of the target ids ``ids`` [K] alone (a
        vocabulary shortlist, ``engine.search.shortlist``), computing only those rows of the output projection; None
        where this kind cannot (the shortlist is then refused)."""
        return None

    def step(self, tokens: Tensor, cache: Any, need_weights: bool) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """Feed one token per sentence ([B]); return logits [B, V] and this step's attention rows.

        The rows are [B, L, H, t] (decoder self) and [B, L, H, S] (cross); None without ``need_weights`` or when
        the model has no such attention.
        """
        out = self.decode(tokens[:, None], None, need_weights, cache)
        # A step of one sentence (greedy's one row, beam's few, captured or not) takes project_rows, faster at a few
        # rows; a batch of many sentences keeps project's row-major product, whose sums stay as they were.
        rows = out.hidden.size(0)
        logits = (self.project_rows if need_weights or rows <= FEW_ROWS else self.project)(out.hidden[:, -1])
        if not need_weights:
            return logits, None, None
        self_rows, cross_rows = out.last_rows()
        return logits, self_rows, cross_rows

    def read_out(self, hidden: Tensor) -> Tensor:
        """Logits [B, T, V] of any decoder layer's output [B, T, D] read as if it were the last (the logit lens)."""
        raise ProbeError(f"A {type(self).__name__}'s decoder layers cannot be read on their own.")

    @property
    def readout(self) -> str:
        """What ``read_out`` passes a layer's output through, in words."""
        return "the output projection"

    def offers(self, *needs: str) -> str | None:
        """None when the network offers every one of ``needs``: a protocol call it answers (``answers``) or a probe
        point pattern (``dec.*.self.v``: ``*`` one dotted part); else what it lacks, in words, for a refusal."""
        missing = [need for need in needs if need not in self.answers and not self._has_points(need)]
        if not missing:
            return None
        calls, points = [n for n in missing if "." not in n], [n for n in missing if "." in n]
        said = [", ".join(calls)] if calls else []
        said += [f"probe point {', '.join(points)}"] if points else []
        return f"its network offers no {' and no '.join(said)}"

    def _has_points(self, pattern: str) -> bool:
        try:
            return bool(self.probes.resolve([pattern]))
        except ProbeError:
            return False

    def run_layer(self, side: str, layer: int, x: Tensor, mask: Tensor | None = None,
                  memory: Tensor | None = None, rows: slice | None = None) -> Tensor:
        """One layer alone on its input ``x`` [B, T, D] (value zeroing re-runs layers), its probe points firing: an
        ``encoder`` layer with ``mask`` [B, 1, 1, T] over ``x``; a ``decoder`` layer over its causal prefix and, when
        given, ``memory`` [B, S, D] under ``mask`` [B, 1, 1, S]. A ``one_stream`` network's decoder layer reads ``x``
        as whole sequences (the prompt's positions, then the output's; no mask: every position real). Its output
        [B, T, D], or of the positions ``rows`` alone (a network may then skip the other rows' work)."""
        raise ProbeError(f"A {type(self).__name__}'s layers cannot be run one at a time.")

    def attention_block(self, kind: str, layer: int) -> AttentionBlock:
        """The attention block ``kind`` (``encoder``, ``decoder`` self-attention, ``cross``) of ``layer``."""
        raise ProbeError(f"A {type(self).__name__} has no Transformer attention blocks.")

    @property
    def max_target_len(self) -> int:
        return self.cfg.max_positions

    @property
    def max_source_len(self) -> int:
        return self.cfg.max_positions if self.has_source else 0


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


@runtime_checkable
class SearchModel(Protocol):
    """What search (``engine.search``), training (``engine.training``) and analysis call on a model (an
    ``nn.Module``: ``parameters`` says where it lives).

    A cache is any object with ``select(index)`` (reorder or subset the batch, for beam search) and ``length``.
    """

    cfg: ModelConfig
    has_source: bool  # False for a language model, whose ``encode`` returns an empty source
    one_stream: bool  # the decoder continues the encoder's positions through the same layers (a decoder-only LLM)
    computes_at_input_precision: bool  # float32 embeddings into a half-precision model compute in float32
    probes: ProbeBoard  # the network's probe points (``engine.models.probes``)

    def encode(self, src: Tensor, need_weights: bool = False) -> Encoded:
        """``src`` [B, S] ids -> memory and, if asked, encoder self-attention (empty for a language model)."""

    def start(self, enc: Encoded) -> Any:
        """A fresh decoding cache for the encoded batch."""

    def step(self, tokens: Tensor, cache: Any, need_weights: bool) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """One token per sentence [B] -> logits [B, V], decoder self rows [B, L, H, t], cross rows [B, L, H, S]."""

    def decode(self, tgt: Tensor, enc: Encoded | None, need_weights: bool = False, cache: Any = None) -> Decoded:
        """A whole prefix [B, T] (no cache) or the tokens after ``cache.length``."""

    def project(self, hidden: Tensor) -> Tensor:
        """Hidden states [B, T, D] -> logits [B, T, V]."""

    def parameters(self, recurse: bool = True) -> Iterator[nn.Parameter]:
        """The weights (``nn.Module.parameters``): where the model lives and what training updates."""

    def eval(self) -> Self:
        """Inference mode (``nn.Module.eval``): no dropout."""

    def train(self, mode: bool = True) -> Self:
        """Training mode (``nn.Module.train``)."""

    def __call__(self, src: Tensor, tgt_in: Tensor, teacher_forcing: float = 1.0) -> Tensor:
        """Training: logits [B, T, V] for the target inputs ``tgt_in``."""

    def attention_block(self, kind: str, layer: int) -> AttentionBlock:
        """An attention block's output projection, head groups and norm (ProbeError where it has none)."""

    def run_layer(self, side: str, layer: int, x: Tensor, mask: Tensor | None = None,
                  memory: Tensor | None = None, rows: slice | None = None) -> Tensor:
        """One layer alone on its input, its probe points firing (ProbeError where it cannot)."""

    def offers(self, *needs: str) -> str | None:
        """None when the network offers every one of ``needs`` (protocol calls, probe point patterns); else what it
        lacks, in words."""

    def read_out(self, hidden: Tensor) -> Tensor:
        """Any decoder layer's output [B, T, D] read as the last one's: logits [B, T, V] (the logit lens)."""

    @property
    def readout(self) -> str:
        """What ``read_out`` passes a layer's output through, in words."""

    @property
    def max_target_len(self) -> int: ...

    @property
    def max_source_len(self) -> int: ...


def tied_keys(model: nn.Module) -> set[str]:
    """Parameters that are another parameter under a second name (a shared embedding, an output projection tied to
    the target embedding); found by identity, so it works on torch's meta device too."""
    every = {name for name, _ in model.named_parameters(remove_duplicate=False)}
    return every - {name for name, _ in model.named_parameters()}


def stored_state(model: nn.Module) -> dict[str, Tensor]:
    """The tensors a checkpoint stores: each parameter once (a tied weight is re-tied by the network's
    constructor)."""
    tied = tied_keys(model)
    return {name: tensor for name, tensor in model.state_dict().items() if name not in tied}


def load_stored_state(model: nn.Module, tensors: dict[str, Tensor]) -> None:
    """Load what ``stored_state`` wrote; tied weights follow the tensor they are tied to."""
    tied = tied_keys(model)
    missing, unexpected = model.load_state_dict(tensors, strict=False)
    if set(missing) - tied or unexpected:
        raise KeyError(f"state does not match the network (missing {sorted(set(missing) - tied)[:5]}, "
                       f"unexpected {sorted(unexpected)[:5]})")
