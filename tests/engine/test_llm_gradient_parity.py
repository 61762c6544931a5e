"""Gradient attribution of decoder-only LLM folders in float64, checked three ways: gradient x input against
finite differences of the attributed quantity, integrated gradients' completeness (64 steps, 1%), and every gradient
map (saliency, gradient x input, integrated gradients, contrastive) against autograd through transformers'
``AutoModelForCausalLM`` with the same forced output (1e-5). Llama and Qwen2 feed their embeddings unscaled, so
the gradient at attnviz's ``embed`` points is the one with respect to transformers' ``inputs_embeds``. attnviz's
distribution folds the folder's end tokens into one ``<eos>`` holding the best end token's logit
(``CausalLM.project``): the reference's log-probabilities are taken over transformers' logits folded the same way."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnviz.engine.attribution.base import Attribution, AttributionSettings, attribution_steps
from attnviz.engine.attribution.forced import embedded, forced_ids, scores
from attnviz.engine.config import DecodeConfig
from attnviz.engine.errors import InputError
from attnviz.engine.loading import load_translator
from attnviz.engine.models.causal_lm import SPECIALS
from tests.llm_folder import make_llm_folder

transformers = pytest.importorskip("transformers")
SENTENCE = "Der Mann sieht den Hund."


@pytest.fixture(scope="module", params=["llama", "qwen2"])
def pair(request, tmp_path_factory):
    folder = make_llm_folder(tmp_path_factory.mktemp(request.param), request.param)
    ours = load_translator(folder, "float32")
    ours.model.double()
    reference = transformers.AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()
    translation = ours.translate(SENTENCE, DecodeConfig(max_len=4))
    reference.attnviz_ends = tuple(ours.model.arch.end_ids)
    assert not set(reference.attnviz_ends) & {ours.tgt_vocab.id(t) - SPECIALS for t in translation.tokens}
    return ours, reference.double(), translation


def attribute(ours, translation, method: str, **settings) -> Attribution:
    events = list(attribution_steps(ours, method, translation.src_tokens, translation.tokens,
                                    AttributionSettings(**settings), roles=translation.roles))
    assert isinstance(events[-1], Attribution)
    return events[-1]


def folder_ids(ours, translation) -> tuple[list[int], list[int]]:
    """(the whole prompt, the forced outputs) as the folder's token ids."""
    prompt = ours.source_ids(translation.src_tokens)
    return [i - SPECIALS for i in prompt], [ours.tgt_vocab.id(t) - SPECIALS for t in translation.tokens]


def reference_quantity(reference, embeds: torch.Tensor, at: int, chosen: int, foil: int | None) -> torch.Tensor:
    """log p(chosen) (minus log p(foil)) at position ``at``, transformers' logits with the end tokens folded."""
    logits = reference(inputs_embeds=embeds[None]).logits[0, at]
    ends = list(reference.attnviz_ends)
    keep = torch.ones_like(logits, dtype=torch.bool)
    keep[ends] = False
    norm = torch.logsumexp(torch.cat([logits[keep], logits[ends].amax(-1, keepdim=True)]), -1)
    return logits[chosen] - norm - ((logits[foil] - norm) if foil is not None else 0)


def reference_gradients(reference, ids: list[int], outputs: list[int], foil: int | None = None,
                        points: torch.Tensor | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(gradient [T, N, D] at the embeddings, or the mean over the integration ``points`` in (0, 1) of the
    straight path from zero, weighted; the embeddings [N, D]): N = the prompt and every output but the last."""
    sequence = torch.tensor(ids + outputs[:-1])
    embeds = reference.get_input_embeddings()(sequence).detach()
    nodes, weights = (torch.ones(1), torch.ones(1)) if points is None else points
    grads = []
    for t, chosen in enumerate(outputs):
        total = torch.zeros_like(embeds)
        for alpha, weight in zip(nodes.tolist(), weights.tolist()):
            x = (alpha * embeds).requires_grad_(True)
            value = reference_quantity(reference, x, len(ids) - 1 + t, chosen, foil)
            total += weight * torch.autograd.grad(value, x)[0]
        grads.append(total)
    return torch.stack(grads).numpy(), embeds.numpy()


def split(values: np.ndarray, s: int) -> tuple[np.ndarray, np.ndarray]:
    """[T, N] as attnviz's maps: source [T, S] (the prompt without its last token), prefix [T, T]."""
    return values[:, :s], np.tril(values[:, s:])


def check(found: Attribution, expected: np.ndarray) -> None:
    """Equal within 1e-5 of the map's largest value (transformers computes its rotary angles and the attention
    softmax in float32, so a signed sum near 0 carries ~1e-7 of rounding)."""
    source, prefix = split(expected, len(found.src_tokens))
    scale = 1e-5 * np.abs(expected).max()
    np.testing.assert_allclose(found.source[-1], source, rtol=1e-5, atol=scale)
    np.testing.assert_allclose(found.prefix[-1], prefix, rtol=1e-5, atol=scale)


@pytest.mark.parametrize("method,aggregate", [("saliency", "l2"), ("saliency", "sum"),
                                              ("gradient-x-input", "sum"), ("gradient-x-input", "l2")])
def test_local_gradient_maps_equal_transformers_autograd(pair, method, aggregate):
    ours, reference, translation = pair
    grads, embeds = reference_gradients(reference, *folder_ids(ours, translation))
    values = grads if method == "saliency" else grads * embeds
    expected = np.linalg.norm(values, axis=-1) if aggregate == "l2" else values.sum(-1)
    check(attribute(ours, translation, method, aggregate=aggregate), expected)


def test_contrastive_gradient_x_input_equals_transformers_autograd(pair):
    ours, reference, translation = pair
    ids, outputs = folder_ids(ours, translation)
    foil = next(i for i in range(40, 400) if i not in outputs)
    grads, embeds = reference_gradients(reference, ids, outputs, foil=foil)
    found = attribute(ours, translation, "gradient-x-input", foil=ours.tgt_vocab.token(foil + SPECIALS))
    check(found, (grads * embeds).sum(-1))


def test_integrated_gradients_equal_transformers_autograd(pair):
    ours, reference, translation = pair
    nodes, weights = np.polynomial.legendre.leggauss(16)
    points = (torch.tensor((nodes + 1) / 2), torch.tensor(weights / 2))  # Gauss-Legendre on [0, 1]
    grads, embeds = reference_gradients(reference, *folder_ids(ours, translation), points=points)
    check(attribute(ours, translation, "integrated-gradients", steps=16), (grads * embeds).sum(-1))


def own_quantity(ours, translation, scale: float) -> np.ndarray:
    """log p(chosen) [T] of attnviz's own float64 network with every token embedding multiplied by ``scale``
    (transformers computes parts in float32: too coarse for a finite difference)."""
    model = ours.model
    forced = forced_ids(ours, translation.src_tokens, translation.tokens)
    src_x, tgt_x = embedded(model, forced)
    t = len(translation.tokens)
    with torch.no_grad():
        found = scores(model, forced, (src_x * scale).expand(t, -1, -1), (tgt_x * scale).expand(t, -1, -1),
                       torch.arange(t), None, False)
    return found.numpy()


def totals(found: Attribution) -> np.ndarray:
    return found.source[-1].sum(-1) + found.prefix[-1].sum(-1)


def test_gradient_x_input_is_the_first_order_change_finite_differences_give(pair):
    """Scaling every embedding by (1 + eps) changes f by eps * sum(gradient x input) to first order (central
    differences: the error is O(eps^2))."""
    ours, _, translation = pair
    eps = 1e-5
    change = (own_quantity(ours, translation, 1 + eps) - own_quantity(ours, translation, 1 - eps)) / (2 * eps)
    np.testing.assert_allclose(totals(attribute(ours, translation, "gradient-x-input")), change, rtol=1e-6)


def test_integrated_gradients_are_complete_at_64_steps(pair):
    """From the <unk> baseline (every token the folder's first token) the path is smooth: complete within 1%."""
    ours, _, translation = pair
    found = attribute(ours, translation, "integrated-gradients", steps=64, baseline="unk")
    gap = found.scores - found.extras["baseline_scores"]
    np.testing.assert_allclose(found.scores, own_quantity(ours, translation, 1.0), rtol=1e-12)
    assert np.all(np.abs(totals(found) - gap) <= 0.01 * np.abs(gap)), (totals(found), gap)
    assert np.all(np.abs(found.extras["completeness_gap"]) <= 0.01 * np.abs(gap))


def test_the_zero_baseline_says_its_gap_and_pad_is_refused(pair):
    """Without additive positions, all-zero embeddings are a singular point of RMSNorm (f jumps within alpha <
    1e-3 of it): quadrature cannot follow, and the result says by how much it misses, never hides it."""
    ours, _, translation = pair
    found = attribute(ours, translation, "integrated-gradients", steps=64)
    gap = own_quantity(ours, translation, 1.0) - own_quantity(ours, translation, 0.0)
    np.testing.assert_allclose(found.extras["completeness_gap"], totals(found) - gap, rtol=1e-9, atol=1e-12)
    worst = np.max(np.abs(found.extras["completeness_gap"]) / np.abs(gap))
    assert f"within {100 * worst:.2g}%" in found.notes[0]
    with pytest.raises(InputError, match="baseline pad is not defined for a model reading a prompt: its folder has "
                                         "no <pad> token of its own"):
        attribute(ours, translation, "integrated-gradients", baseline="pad")


def test_shares_split_the_prompt_by_role_and_sum_to_one(pair):
    ours, _, translation = pair
    for method in ("saliency", "gradient-x-input", "integrated-gradients"):
        found = attribute(ours, translation, method)
        shares = found.shares()
        assert shares.shape == (1, len(translation.tokens), 3) and np.all(shares >= 0)
        np.testing.assert_allclose(shares.sum(-1), 1.0, rtol=1e-12)
        a, b = found.span
        assert found.src_roles == tuple(translation.roles) and set(found.src_roles[a:b]) == {"source"}
        span = np.abs(found.source[-1, :, a:b]).sum(-1)
        total = np.abs(found.source[-1]).sum(-1) + np.abs(found.prefix[-1]).sum(-1)
        np.testing.assert_allclose(shares[0, :, 0], span / total, rtol=1e-12)
        assert np.all(shares[0, :, 1] > 0)  # the instruction and the template are read too
