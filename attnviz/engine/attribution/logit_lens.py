"""The logit lens on the decoder (nostalgebraist 2020): what each decoder layer's output would predict if it were
the last, so the user sees at which layer an output token is decided.

At every step of a teacher-forced translation, the output of decoder layer l (its ``dec.{l}.out`` probe point) is
read through what follows the last layer (the network's ``read_out``): the final LayerNorm of a pre-norm network (a
post-norm layer ends in its own LayerNorm, so nothing is added) and the output projection, then a softmax. The last
layer's lens is the model's own distribution. ``LogitLens`` holds the top tokens with their probabilities and the
probability and rank of the chosen token, per layer and step, and the language of each layer's top token (a
heuristic guess: ``engine.text.token_language``); ``logit_lens_steps`` is the generator (progress, then
the result) the CLI and the GUI consume. Defined for networks of Transformer layers (a residual stream read by one
final projection); not for the LSTM, whose decoder layers run fused inside one ``nn.LSTM`` and reach the output only
through the attention layer.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from attnviz.engine.attribution.base import AttributionProgress
from attnviz.engine.attribution.forced import forced_ids, next_token_logp
from attnviz.engine.errors import InputError
from attnviz.engine.models.probes import capture, layer_point
from attnviz.engine.models.protocol import SearchModel
from attnviz.engine.text.token_language import HEURISTIC, LANGUAGES, marks_word_starts, special_label, token_language

if TYPE_CHECKING:
    from attnviz.engine.translator import Translator

MAX_TOP = 50


def lens_not_defined(translator: Translator) -> str | None:
    """Why the logit lens is not defined for ``translator``'s network (None where it is): it reads each decoder
    layer's output (``dec.{l}.out``) through what follows the last layer (``read_out``)."""
    missing = translator.model.offers("read_out", "dec.*.out")
    if missing is None:
        return None
    return f"{missing}: the logit lens reads each decoder layer's output through what follows the last layer"


@dataclass(frozen=True)
class LogitLens:
    """Per decoder layer (L) and output step (T): the K most probable tokens, the chosen token's probability and
    rank (1 = the layer's top token), and the guessed language of the top token (one of ``LANGUAGES``)."""

    src_tokens: tuple[str, ...]
    tokens: tuple[str, ...]  # the T chosen outputs
    top_tokens: np.ndarray  # [L, T, K] str
    top_probs: np.ndarray  # [L, T, K]
    chosen_prob: np.ndarray  # [L, T]
    chosen_rank: np.ndarray  # [L, T] int
    readout: str  # what each layer's output passes through
    top_language: np.ndarray  # [L, T] str: the language of each layer's top token (a heuristic guess)

    def __post_init__(self) -> None:
        t = len(self.tokens)
        layers, k = self.top_tokens.shape[0], self.top_tokens.shape[-1]
        for name, array, shape in (("top_tokens", self.top_tokens, (layers, t, k)),
                                   ("top_probs", self.top_probs, (layers, t, k)),
                                   ("chosen_prob", self.chosen_prob, (layers, t)),
                                   ("chosen_rank", self.chosen_rank, (layers, t)),
                                   ("top_language", self.top_language, (layers, t))):
            if array.shape != shape:
                raise ValueError(f"{name} has shape {array.shape}, expected {list(shape)} for {t} output tokens")

    @property
    def layers(self) -> int:
        return self.top_tokens.shape[0]

    def decided_at(self) -> np.ndarray:
        """[T]: the first layer (from 1) from which on the chosen token is every later layer's top token; 0 when
        even the last layer does not rank it first (a forced token the model would not choose)."""
        top = self.chosen_rank == 1  # [L, T]
        settled = np.flip(np.logical_and.accumulate(np.flip(top, 0), axis=0), 0)  # top from this layer on
        return np.where(settled.any(0), self.layers - settled.sum(0) + 1, 0)

    def counted_steps(self) -> np.ndarray:
        """[T] bool: the steps whose chosen token is a word piece, not a special token (the end of the sentence)."""
        return np.array([not special_label(token) for token in self.tokens], dtype=bool)

    def language_counts(self) -> np.ndarray:
        """[L, len(LANGUAGES)]: per layer, how many of the ``counted_steps`` have a top token of each language."""
        shown = self.top_language[:, self.counted_steps()]
        return np.stack([(shown == lang).sum(1) for lang in LANGUAGES], axis=1)

    def cells(self) -> list[dict[str, Any]]:
        """One record per layer (from 1) and step (from 1): the chosen token, the layer's top token with its
        probability and guessed language, the chosen token's probability and rank (the strip's export)."""
        return [{"layer": layer + 1, "step": step + 1, "chosen": self.tokens[step],
                 "top_token": str(self.top_tokens[layer, step, 0]), "top_prob": float(self.top_probs[layer, step, 0]),
                 "top_language": str(self.top_language[layer, step]), "p_chosen": float(self.chosen_prob[layer, step]),
                 "rank": int(self.chosen_rank[layer, step])}
                for layer in range(self.layers) for step in range(len(self.tokens))]

    def metadata(self) -> dict[str, Any]:
        return {"method": "logit-lens", "readout": self.readout, "layers": self.layers,
                "src_tokens": list(self.src_tokens), "tokens": list(self.tokens),
                "decided_at_layer": self.decided_at().tolist(), "languages": list(LANGUAGES),
                "language_guess": HEURISTIC}

    def arrays(self) -> dict[str, np.ndarray]:
        return {"top_tokens": self.top_tokens, "top_probs": self.top_probs, "chosen_prob": self.chosen_prob,
                "chosen_rank": self.chosen_rank, "top_language": self.top_language,
                "src_tokens": np.array(self.src_tokens, dtype=str),
                "tokens": np.array(self.tokens, dtype=str)}


@torch.inference_mode()
def _layer_outputs(model: SearchModel, forced) -> list[torch.Tensor]:
    """Each decoder layer's output [T, D] of the forced pass, read at its ``dec.{l}.out`` probe point."""
    device = next(model.parameters()).device
    with capture(model, ["dec.*.out"]) as seen:
        model.decode(forced.tgt_in[None].to(device), model.encode(forced.src[None].to(device)))
    return [seen[layer_point("decoder", layer, "out")][0] for layer in range(model.cfg.dec_layers)]


def logit_lens_steps(translator: Translator, src_tokens: Sequence[str], tokens: Sequence[str], top_k: int = 5,
                     stop: threading.Event | None = None) -> Iterator[AttributionProgress | LogitLens]:
    """The logit lens of one teacher-forced translation: a progress event per layer, then the ``LogitLens``."""
    why = lens_not_defined(translator)
    if why is not None:
        raise InputError(f"The logit lens is not defined for a {translator.kind.title}: {why}")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= MAX_TOP:
        raise InputError(f"top_k must be a whole number from 1 to {MAX_TOP}, not {top_k!r}")
    if not tokens:
        raise InputError("Nothing to read: the translation has no output tokens.")
    model, vocab = translator.model, translator.tgt_vocab
    forced = forced_ids(translator, src_tokens, tokens)
    chosen = forced.tgt_out
    top_k = min(top_k, len(vocab))
    outputs = _layer_outputs(model, forced)
    tops, top_p, chosen_p, ranks = [], [], [], []
    for i, hidden in enumerate(outputs):
        with torch.inference_mode():
            probs = next_token_logp(model.read_out(hidden)).exp().double().cpu()  # [T, V]
        p, ids = probs.topk(top_k, dim=-1)  # [T, K]
        mine = probs[torch.arange(len(tokens)), chosen]  # [T]
        tops.append([[vocab.token(int(j)) for j in row] for row in ids])
        top_p.append(p.numpy())
        chosen_p.append(mine.numpy())
        ranks.append((probs > mine[:, None]).sum(-1).numpy() + 1)
        yield AttributionProgress(i + 1, len(outputs), "logit lens", "layers")
        if stop is not None and stop.is_set():
            return
    top_tokens = np.array(tops, dtype=str).reshape(len(outputs), len(tokens), top_k)
    marked = marks_word_starts(vocab.to_list())
    languages = np.array([[token_language(str(t), marked) for t in row] for row in top_tokens[:, :, 0]], dtype=str)
    yield LogitLens(tuple(src_tokens), tuple(tokens), top_tokens, np.stack(top_p), np.stack(chosen_p),
                    np.stack(ranks), model.readout, languages.reshape(len(outputs), len(tokens)))
