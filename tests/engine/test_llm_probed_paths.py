"""A decoder-only LLM runs its first step inside the prompt's prefill when nothing is probed (the lead token rides
along) and in a pass of its own when a probe block is open: the two paths give the same logits and attention at
every step, for every family and with the weights asked or not."""

from __future__ import annotations

import pytest
import torch

from attnviz.engine.config import DecodeConfig
from attnviz.engine.loading import load_translator
from attnviz.engine.models.probes import capture
from attnviz.engine.text.vocab import SOS_ID
from tests.llm_folder import make_llm_folder

pytest.importorskip("transformers")
SENTENCE = "Der Mann sieht den Hund."
STEPS = 6


@pytest.fixture(scope="module", params=["qwen2", "gemma3"])
def llm(request, tmp_path_factory):
    translator = load_translator(make_llm_folder(tmp_path_factory.mktemp(request.param), request.param), "float32")
    translator.model.double()
    return translator


def _steps(model, src: torch.Tensor, need_weights: bool) -> list[tuple[torch.Tensor, ...]]:
    """Greedy steps through the protocol: each step's logits and (asked) attention rows."""
    cache = model.start(model.encode(src, need_weights))
    tokens, found = torch.tensor([SOS_ID]), []
    with torch.inference_mode():
        for _ in range(STEPS):
            logits, own, cross = model.step(tokens, cache, need_weights)
            found.append(tuple(t for t in (logits, own, cross) if t is not None))
            tokens = logits.argmax(-1)
    return found


@pytest.mark.parametrize("need_weights", [False, True])
def test_the_probed_and_unprobed_paths_agree_at_every_step(llm, need_weights):
    model = llm.model
    src = torch.tensor([llm.prepare(SENTENCE).src_ids])
    plain = _steps(model, src, need_weights)
    with capture(model, ["dec.0.out"]) as seen:  # an open block: the first step takes its own pass
        probed = _steps(model, src, need_weights)
    assert len(seen.all("dec.0.out")) == STEPS  # the probe saw every step, the first in a pass of its own
    assert len(plain) == len(probed) == STEPS
    for step, (a, b) in enumerate(zip(plain, probed, strict=True)):
        assert len(a) == len(b) == (3 if need_weights else 1)
        for x, y in zip(a, b, strict=True):
            torch.testing.assert_close(x, y, atol=1e-12, rtol=0, msg=f"step {step}")
    assert llm.translate(SENTENCE, DecodeConfig(max_len=STEPS)).tokens  # the translator decodes the same model
