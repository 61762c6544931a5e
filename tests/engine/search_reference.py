"""What a search returns, flattened into named arrays, for toy models of every kind: the reference that the search
speed work (shared encoder keys/values, a cache that grows in place) is compared with.

``capture_all()`` decodes a few sentences greedily and by beam (events with every attention row, and batched) on
seeded, untrained toy models; ``python -m tests.engine.search_reference OUT.npz`` writes
``tests/engine/data/search_reference.npz`` (torch 2.13 CPU, float32, one thread). The numbers were first stored from
the code before that change; the file was rewritten with these inputs, chosen so that no near-tie between two tokens
or two beam candidates lets another CPU's rounding flip a choice (``test_search_cache.clear_choices``), after the
code then reproduced the old file bit for bit on the machine that wrote both.
"""

from __future__ import annotations

import sys

import numpy as np
import torch

from attnviz.engine.config import DecodeConfig
from attnviz.engine.corpus.batching import pad_batch
from attnviz.engine.events import BeamDone, BeamStep, DecodeStep
from attnviz.engine.search.torch_batch import beam_batch, greedy_batch
from tests.helpers import make_toy_lm, make_toy_translator

SENTENCES = ("q1 q2 q3 q4", "q7 q0 q11 q5 q5 q2", "q3")
PREFIXES = ("ab", "bcd")
MODELS = ("transformer", "marian", "marian-wide", "rnn-attention", "char-lm")


def toy(name: str):
    """Seeded untrained toy models; the Transformer is pre-LN so that it differs from Marian's post-LN too."""
    if name == "char-lm":
        return make_toy_lm(seed=5)
    if name == "transformer":
        return make_toy_translator(seed=5, kind="transformer", norm="pre")
    if name == "marian-wide":  # heads as wide as real models' (64), where matrix products block their sums
        return make_toy_translator(seed=5, kind="marian", d_model=128, heads=2, ff_dim=256)
    if name == "rnn-attention":  # seed 5's beams hold candidates within 1e-5 of each other: near-ties
        return make_toy_translator(seed=18, kind=name)
    return make_toy_translator(seed=5, kind=name)


def _step_arrays(prefix: str, step: DecodeStep) -> dict[str, np.ndarray]:
    out = {f"{prefix}/token": np.array(step.token_id), f"{prefix}/probability": np.array(step.probability)}
    for name, rows in (("self", step.self_attention), ("cross", step.cross_attention)):
        if rows is not None:
            out[f"{prefix}/{name}"] = np.asarray(rows)
    return out


def capture(name: str) -> dict[str, np.ndarray]:
    translator = toy(name)
    texts = PREFIXES if name == "char-lm" else SENTENCES
    greedy, beam = DecodeConfig(max_len=9), DecodeConfig(max_len=9, beam=4)
    arrays: dict[str, np.ndarray] = {}
    for s, text in enumerate(texts):
        steps = [e for e in translator.steps(text, greedy) if isinstance(e, DecodeStep)]
        for t, step in enumerate(steps):
            arrays |= _step_arrays(f"{name}/{s}/greedy/{t}", step)
        for event in translator.beam_steps(text, beam):
            if isinstance(event, BeamStep):
                for node in event.nodes:
                    key = f"{name}/{s}/beam/{node.id}"
                    arrays |= _step_arrays(key, node.step)
                    arrays[f"{key}/node"] = np.array([node.parent, node.step.index])
                    arrays[f"{key}/score"] = np.array([node.score, np.nan if node.normalised is None
                                                       else node.normalised])
                    arrays[f"{key}/status"] = np.array(node.status)
            elif isinstance(event, BeamDone):
                arrays[f"{name}/{s}/beam/ranking"] = np.array(event.ranking)
    if name != "char-lm":
        src = pad_batch([translator.prepare(t).src_ids for t in texts]).long()
        for b, ids in enumerate(beam_batch(translator.model, src, DecodeConfig(max_len=9, beam=3))):
            arrays[f"{name}/batch/beam/{b}"] = np.array(ids)
        for b, ids in enumerate(greedy_batch(translator.model, src, 9)):
            arrays[f"{name}/batch/greedy/{b}"] = np.array(ids)
    return arrays


def capture_all() -> dict[str, np.ndarray]:
    arrays: dict[str, np.ndarray] = {}
    for name in MODELS:
        arrays |= capture(name)
    return arrays


if __name__ == "__main__":
    torch.set_num_threads(1)  # as the tests run (tests/conftest.py): the thread count changes how sums are split
    np.savez_compressed(sys.argv[1], **capture_all())
