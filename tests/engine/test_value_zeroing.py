"""Value zeroing (engine.attribution.mixing.value_zeroing) on tiny seeded models in float64: a token no query can
attend to (a masked source position, a later decoder input) scores 0, rows sum to 1, a score equals re-running the
layer by hand with that value zeroed, the rollout keeps rows stochastic, and the registered method's maps."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from attnviz.engine.attribution.base import Attribution, AttributionProgress, attribution_steps
from attnviz.engine.attribution.mixing.capture import capture, teacher_forced_ids
from attnviz.engine.attribution.mixing.value_zeroing import value_zeroing
from attnviz.engine.text.vocab import PAD
from tests.helpers import make_toy_lm, make_toy_translator

SRC = ("<sos>", "q3", "q1", PAD, "q4", "<eos>")  # position 3 is masked: no query may attend to it
OUT = ("w4", "w1", "w3", "<eos>")


def _maps(translator, src=SRC, out=OUT):
    return value_zeroing(capture(translator.model, *teacher_forced_ids(translator, src, out)))


def test_a_token_no_query_attends_to_scores_zero_and_rows_sum_to_one():
    translator = make_toy_translator(2, dropout=0.0)
    translator.model.double()
    maps = _maps(translator)
    s, t = len(SRC), len(OUT)
    assert maps.encoder.shape == (translator.config.enc_layers, s, s)
    assert maps.decoder.shape == (translator.config.dec_layers, t, s + t)
    np.testing.assert_allclose(maps.encoder[..., 3], 0, atol=1e-12)  # the masked source token, every layer
    np.testing.assert_allclose(maps.decoder[..., 3], 0, atol=1e-12)  # ... and in cross-attention
    prefix = maps.decoder[..., s:]
    np.testing.assert_allclose(np.triu(prefix, 1), 0, atol=1e-12)  # a later decoder input cannot matter
    np.testing.assert_allclose(maps.encoder.sum(-1), 1, atol=1e-12)
    np.testing.assert_allclose(maps.decoder.sum(-1), 1, atol=1e-12)
    assert (maps.encoder[..., [0, 1, 2, 4, 5]] > 0).all()  # every real token mixes in
    np.testing.assert_allclose(maps.total.sum(-1), 1, atol=1e-12)
    np.testing.assert_allclose(maps.encoder_rollout[-1], maps.encoder[1] @ maps.encoder[0], atol=1e-12)


def _zeroed_distances(layer, x, mask, j: int) -> torch.Tensor:
    """The layer run alone twice, as the paper describes: as is, and with token j's value vector zeroed; the
    cosine distance of every token's output [S]."""
    with torch.no_grad():
        reference, _ = layer(x, mask, False)

        def zero(module, args, output):
            output = output.clone()
            output[:, j] = 0
            return output

        handle = layer.self_attn.v_proj.register_forward_hook(zero)
        try:
            zeroed, _ = layer(x, mask, False)
        finally:
            handle.remove()
    return 1 - F.cosine_similarity(zeroed[0], reference[0], dim=-1)


def test_a_map_is_the_cosine_distances_of_the_layer_rerun_by_hand_rows_normalised():
    translator = make_toy_translator(4, dropout=0.0, enc_layers=1)
    translator.model.double()
    cap = capture(translator.model, *teacher_forced_ids(translator, SRC, OUT))
    layer, x = translator.model.encoder[0], cap.layers["encoder"][0].x
    raw = torch.stack([_zeroed_distances(layer, x, cap.mask, j) for j in range(len(SRC))], dim=1).numpy()  # [i, j]
    np.testing.assert_allclose(value_zeroing(cap).encoder[0], raw / raw.sum(1, keepdims=True), atol=1e-12)


def test_the_registered_method_gives_per_layer_maps_with_progress():
    translator = make_toy_translator(2, dropout=0.0)
    translator.model.double()
    events = list(attribution_steps(translator, "value-zeroing", SRC, OUT))
    progress = [e for e in events if isinstance(e, AttributionProgress)]
    layers = translator.config.enc_layers + translator.config.dec_layers
    assert [p.done for p in progress] == list(range(layers + 1)) and progress[-1].total == layers
    result = events[-1]
    assert isinstance(result, Attribution) and result.layered
    np.testing.assert_allclose(result.source.sum(-1) + result.prefix.sum(-1), 1, atol=1e-12)
    np.testing.assert_allclose(result.source[..., 3], 0, atol=1e-12)


def test_a_language_model_has_decoder_maps_only():
    lm = make_toy_lm(1)
    lm.model.double()
    maps = _maps(lm, (), tuple("abcd"))
    assert maps.encoder is None and maps.decoder.shape == (lm.config.dec_layers, 4, 4)
    np.testing.assert_allclose(maps.decoder[:, 0, 0], 1)  # the first position reads only itself
