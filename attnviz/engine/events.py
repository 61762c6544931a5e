"""Typed events that leave the engine: frozen dataclasses of CPU numpy arrays, safe to pass between threads.

Every long-running engine function is a generator of these events; the CLI, the GUI and the tests consume the same
streams. Each event checks its array shapes against its token counts on creation, so a consumer can trust them.
A training run's events form the union ``TrainEvent``, over which its consumers match exhaustively.

Attention kinds are described once, in ``ATTENTION_KINDS``: which tokens label the rows (queries) and the columns
(keys). A model lacks a kind by leaving it out (an RNN has only ``cross``; a language model only ``decoder``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple, TypeAlias

import numpy as np

from attnviz.engine.records import EvalRecord


class AttentionKind(NamedTuple):
    key: str
    label: str
    query_axis: str
    key_axis: str
    causal: bool = False  # query i sees keys 0..i only: the cells after the diagonal are masked, not zero weights


ATTENTION_KINDS: dict[str, AttentionKind] = {
    "encoder": AttentionKind("encoder", "Encoder self-attention", "source token (query)", "source token (key)"),
    "decoder": AttentionKind("decoder", "Decoder self-attention", "output step (query)", "decoder input (key)",
                             causal=True),
    "cross": AttentionKind("cross", "Cross-attention", "output step (query)", "source token (key)"),
}


def _check(array: np.ndarray | None, name: str, trailing: tuple[int, ...]) -> None:
    if array is None:
        return
    if array.ndim != 2 + len(trailing) or array.shape[2:] != trailing:
        raise ValueError(f"{name} has shape {array.shape}, expected [L, H, {', '.join(map(str, trailing))}]")


@dataclass(frozen=True)
class EncoderPass:
    """The source as the model sees it, and the encoder self-attention [L, H, S, S] (None if the model has none)."""

    src_tokens: tuple[str, ...]  # with <sos>/<eos> when the model adds them
    encoder_attention: np.ndarray | None
    warnings: tuple[str, ...] = ()
    # an LLM's prompt: per source token, "template" (the chat template's), "instruction" (the prompt's words around
    # the sentence) or "source" (the sentence's own); empty for a model that reads the sentence alone
    roles: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        s = len(self.src_tokens)
        _check(self.encoder_attention, "encoder_attention", (s, s))
        if self.roles and len(self.roles) != s:
            raise ValueError(f"roles name {len(self.roles)} tokens, but the source has {s}")

    @property
    def span(self) -> tuple[int, int]:
        """[first, last + 1) of the sentence's own tokens: the whole source unless ``roles`` say otherwise."""
        inside = [i for i, role in enumerate(self.roles) if role == "source"]
        return (inside[0], inside[-1] + 1) if inside else (0, len(self.src_tokens))


@dataclass(frozen=True)
class DecodeStep:
    """One decoding step: the chosen token, its distribution summary and this step's attention rows.

    ``index`` t counts from 0. The decoder input at step t is ``<sos>`` (t = 0) or the token chosen at step t - 1,
    so ``self_attention`` [L, H, t + 1] looks at those t + 1 inputs and ``cross_attention`` [L, H, S] at the source.
    """

    index: int
    token: str
    token_id: int
    probability: float
    topk: tuple[tuple[str, float], ...]
    entropy: float  # of the full next-token distribution, in nats
    self_attention: np.ndarray | None
    cross_attention: np.ndarray | None
    src_len: int = 0
    forced: bool = False  # the token was given (a language model's prefix), not chosen by the model

    def __post_init__(self) -> None:
        _check(self.self_attention, "self_attention", (self.index + 1,))
        _check(self.cross_attention, "cross_attention", (self.src_len,))


@dataclass(frozen=True)
class Translation:
    """A finished translation with every attention matrix.

    ``tokens`` are the T chosen tokens (ending in ``<eos>`` when the model stopped by itself); ``attention`` maps
    kind to an array: encoder [L, H, S, S], decoder [L, H, T, T], cross [L, H, T, S].
    """

    src_tokens: tuple[str, ...]
    tokens: tuple[str, ...]
    text: str
    attention: dict[str, np.ndarray]
    probabilities: tuple[float, ...] = ()
    warnings: tuple[str, ...] = ()
    steps: tuple[DecodeStep, ...] = field(default=(), repr=False)
    roles: tuple[str, ...] = ()  # per source token, as ``EncoderPass.roles``

    @property
    def words(self) -> tuple[str, ...]:
        """The output tokens without the closing ``<eos>``."""
        return self.tokens[:-1] if self.tokens and self.tokens[-1] == "<eos>" else self.tokens

    @property
    def decoder_inputs(self) -> tuple[str, ...]:
        """Column labels of decoder self-attention: ``<sos>`` then every chosen token but the last."""
        return ("<sos>",) + self.tokens[:-1]

    def axis_labels(self, kind: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(row labels, column labels) of one attention kind."""
        rows = self.src_tokens if kind == "encoder" else self.tokens
        cols = self.decoder_inputs if kind == "decoder" else self.src_tokens
        return rows, cols

    def __post_init__(self) -> None:
        s, t = len(self.src_tokens), len(self.tokens)
        expected = {"encoder": (s, s), "decoder": (t, t), "cross": (t, s)}
        for kind, array in self.attention.items():
            if kind not in expected:
                raise ValueError(f"unknown attention kind {kind!r}")
            _check(array, f"{kind} attention", expected[kind])


def assemble(first: EncoderPass, steps: list[DecodeStep], text: str) -> Translation:
    """Build the full matrices of a Translation from an encoder pass and its steps (rows padded with zeros)."""
    t = len(steps)
    attention: dict[str, np.ndarray] = {}
    if first.encoder_attention is not None:  # maps kept in float16 (an LLM's) are rebuilt in float32 for use
        attention["encoder"] = first.encoder_attention.astype(np.float32, copy=False)
    if steps and steps[0].self_attention is not None:
        lay, heads = steps[0].self_attention.shape[:2]
        dec = np.zeros((lay, heads, t, t), dtype=np.float32)
        for step in steps:
            dec[:, :, step.index, : step.index + 1] = step.self_attention
        attention["decoder"] = dec
    if steps and steps[0].cross_attention is not None:
        # T x [L, H, S] -> [L, H, T, S]; a step without rows would leave T short, which Translation rejects
        rows = [s.cross_attention for s in steps if s.cross_attention is not None]
        attention["cross"] = np.stack(rows, axis=2).astype(np.float32, copy=False)
    return Translation(
        src_tokens=first.src_tokens,
        tokens=tuple(s.token for s in steps),
        text=text,
        attention=attention,
        probabilities=tuple(s.probability for s in steps),
        warnings=first.warnings,
        steps=tuple(steps),
        roles=first.roles,
    )


# -- beam search ----------------------------------------------------------------------------------------------------


BEAM_STATUSES = ("alive", "finished", "pruned")


@dataclass(frozen=True)
class BeamNode:
    """One hypothesis' newest token in a search tree: a beam candidate, or a step of a greedy or what-if path.

    ``step`` is the ``DecodeStep`` that chose the token: its top-k, entropy and attention rows are those of the
    parent's distribution (shared by siblings), so a node's path of steps is the hypothesis' whole decoding.
    """

    id: int
    parent: int  # -1: the root (the decoder's <sos>)
    step: DecodeStep
    score: float  # the sum of the log-probabilities of the path's tokens
    status: str  # "alive" (kept in the beam), "finished" (ended, or reached the step limit), "pruned" (dropped)
    normalised: float | None = None  # a finished hypothesis' score / length penalty: what ranks the n-best
    branch: int = 0  # 0: the search itself; k: the k-th what-if branch

    def __post_init__(self) -> None:
        if self.status not in BEAM_STATUSES:
            raise ValueError(f"status must be one of {BEAM_STATUSES}, not {self.status!r}")


@dataclass(frozen=True)
class BeamStep:
    """One step of beam search: every candidate it considered, kept, finished or pruned."""

    index: int
    nodes: tuple[BeamNode, ...]

    @property
    def alive(self) -> tuple[BeamNode, ...]:
        return tuple(n for n in self.nodes if n.status == "alive")


@dataclass(frozen=True)
class BeamDone:
    """The end of a beam search: finished hypotheses' node ids, best first (by length-normalised score)."""

    ranking: tuple[int, ...]


# -- training: what ``engine.training.loop.train`` yields (``TrainEvent``) ---------------------------------------------


@dataclass(frozen=True)
class TrainStarted:
    total_steps: int
    epochs: int
    parameters: int
    train_pairs: int
    val_pairs: int
    device: str
    resumed_from_step: int = 0
    processes: int = 1  # training processes (torchrun's world size); each takes its share of every step's batches


@dataclass(frozen=True)
class TrainStep:
    step: int  # optimizer steps done so far (1-based)
    epoch: int  # 1-based
    loss: float  # this batch's training loss (label-smoothed when smoothing is on)
    lr: float
    tokens_per_s: float  # non-pad target tokens per second, averaged since the last evaluation
    progress: float  # 0..1 of the whole run
    eta_s: float


@dataclass(frozen=True)
class Sample:
    """What the model produced at an evaluation: a validation sentence's translation beside its reference, or a
    language model's sequence sampled from nothing (no source, no reference)."""

    output: str
    source: str | None = None
    reference: str | None = None


@dataclass(frozen=True)
class EvalResult:
    """One evaluation: its figures (as the run's history keeps them), some outputs and the probe's attention."""

    record: EvalRecord  # step, epoch, validation loss, PPL, accuracy, BLEU (None for a language model), time
    samples: tuple[Sample, ...]
    probe: Translation | None  # the fixed probe sentence with all its attention at this point of training


@dataclass(frozen=True)
class EvalStarted:
    """An evaluation begins: validation loss, then (a translation model) translating ``sentences`` for BLEU, which
    can take a minute on a CPU; the ``EvalResult`` follows."""

    step: int
    sentences: int  # validation sentences translated for BLEU (0: a language model, which samples instead)


@dataclass(frozen=True)
class TrainHistory:
    """What a resumed run had shown before it stopped, read back from its files so the views continue where they
    were: the training steps (loss curve) and every evaluation (table, curves, the probe's attention forming)."""

    steps: tuple[TrainStep, ...]
    evaluations: tuple[EvalResult, ...]


@dataclass(frozen=True)
class CheckpointSaved:
    path: str
    role: str  # "best", "last", "epoch" or "average"
    step: int


@dataclass(frozen=True)
class TrainFinished:
    best_path: str | None  # None when the run never evaluated, so no best checkpoint was written
    last_path: str
    final: EvalRecord | None  # the last evaluation, if the run made any


@dataclass(frozen=True)
class TrainStopped:
    step: int
    last_path: str  # the checkpoint written on stopping; resume from its training-state file


@dataclass(frozen=True)
class TrainFailed:
    message: str
    last_good: str | None  # the newest intact checkpoint, if any


@dataclass(frozen=True)
class TrainNote:
    """Something the user should know that does not stop the run (e.g. a file repaired on resume)."""

    message: str
    warning: bool = False  # a setting that will make the run disappoint (e.g. a warm-up longer than the run)


TrainEvent: TypeAlias = (TrainStarted | TrainNote | TrainHistory | TrainStep | EvalStarted | EvalResult
                         | CheckpointSaved | TrainFinished | TrainStopped | TrainFailed)
"""Every event a training run yields: consumers ``match`` over it and end in ``assert_never``, so a new event kind
is a type error in each consumer that does not handle it."""
