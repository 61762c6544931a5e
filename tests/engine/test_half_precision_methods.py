"""Every attribution method on a half-precision LLM (bfloat16, float16: how Llama, Qwen and Gemma ship): it runs,
its maps are finite, and they agree with the same model at float32. The folder is stored in bfloat16, so both load
the same weights: gradient methods compute in float32 at either precision (float32 embeddings, the weights upcast
as they go: ``gradients.exact_inputs``) and give the same maps to 1e-6. Value zeroing's
cosine distances are taken in float32 too, but its layers run at the model's precision; activation patching's
recovered share divides by the gap between the clean and the corrupted log-probability, which bfloat16's rounded
logits move (on this tiny random model the gap is small): both agree more loosely, and correlate above 0.9."""

from __future__ import annotations

import numpy as np
import pytest

from attnviz.engine.attribution.base import Attribution, attribution_steps, methods_for
from attnviz.engine.config import DecodeConfig
from attnviz.engine.loading import load_translator
from tests.llm_folder import make_llm_folder

pytest.importorskip("transformers")
SENTENCE = "Der Mann sieht den Hund über die Straße laufen."
# relative L2 distance to float32 allowed, per method and precision (measured: gradients 0 in bfloat16 and 1e-7 in
# float16, ALTI+ 0.3% and 0.1%, value zeroing 8% and 1.1%, patching 37% (correlation 0.95) and 4.8%)
GRADIENTS = ("saliency", "gradient-x-input", "integrated-gradients")
LOOSER = {"value-zeroing": {"bfloat16": 0.15, "float16": 0.03}, "patching": {"bfloat16": 0.45, "float16": 0.08}}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return make_llm_folder(tmp_path_factory.mktemp("half"), "qwen2", dtype="bfloat16")


def _maps(translator, method: str, translation) -> np.ndarray:
    found = [e for e in attribution_steps(translator, method, translation.src_tokens, translation.tokens,
                                          roles=translation.roles) if isinstance(e, Attribution)]
    assert len(found) == 1
    return np.concatenate([found[0].source.ravel(), found[0].prefix.ravel()])


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_every_method_runs_at_half_precision_and_agrees_with_float32(folder, dtype):
    exact, half = load_translator(folder, "float32"), load_translator(folder, dtype)
    assert half.dtype == dtype
    translation = exact.translate(SENTENCE, DecodeConfig(max_len=5))
    methods = [m.name for m in methods_for(half).defined]
    assert {"saliency", "gradient-x-input", "integrated-gradients", "alti-plus", "value-zeroing"} <= set(methods)
    for method in methods:
        a, b = _maps(exact, method, translation), _maps(half, method, translation)
        assert np.isfinite(b).all() and np.abs(b).sum() > 0, method
        allowed = 1e-6 if method in GRADIENTS else LOOSER.get(method, {}).get(dtype, 0.02)
        assert np.linalg.norm(a - b) <= allowed * np.linalg.norm(a), method
        assert np.corrcoef(a, b)[0, 1] > 0.9, method
