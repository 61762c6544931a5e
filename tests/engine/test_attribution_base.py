"""The attribution base: the result type checks its shapes against its tokens, the source share, the settings'
validation and the method registry's refusals (a method not defined for a kind, settings it does not read)."""

from __future__ import annotations

import numpy as np
import pytest

from attnviz.engine.attribution.base import (
    Attribution,
    AttributionMethod,
    AttributionProgress,
    AttributionSettings,
    attribution_steps,
    get_method,
    methods_for,
    registered,
)
from attnviz.engine.errors import ConfigError, InputError
from tests.helpers import make_toy_lm, make_toy_translator

SRC, OUT = ("<sos>", "q1", "q2", "<eos>"), ("w2", "w1", "<eos>")


def _result(layers: int = 1, layered: bool = False, **over) -> Attribution:
    rng = np.random.default_rng(0)
    args = dict(method="m", settings={}, src_tokens=SRC, tokens=OUT, source=rng.random((layers, 3, 4)),
                prefix=np.tril(rng.random((layers, 3, 3))), layered=layered)
    return Attribution(**(args | over))


def test_shapes_are_checked_against_the_tokens():
    assert _result().decoder_inputs == ("<sos>", "w2", "w1")
    with pytest.raises(ValueError, match=r"source has shape \(1, 3, 5\), expected \[L', 3, 4\]"):
        _result(source=np.zeros((1, 3, 5)))
    with pytest.raises(ValueError, match=r"prefix has shape \(1, 4, 3\), expected \[L', 3, 3\]"):
        _result(prefix=np.zeros((1, 4, 3)))
    with pytest.raises(ValueError, match="an attribution without layers has L' = 1, not 2"):
        _result(layers=2)
    with pytest.raises(ValueError, match="same number of layers"):
        _result(layers=2, layered=True, prefix=np.zeros((3, 3, 3)))
    with pytest.raises(ValueError, match=r"scores has shape \(2,\), expected \[3\]"):
        _result(scores=np.zeros(2))
    assert _result(layers=3, layered=True).layers == 3


def test_source_share_uses_absolute_values_and_is_zero_without_any_attribution():
    source = np.array([[[1.0, -1.0], [0.0, 0.0]]])  # [1, T=2, S=2]
    prefix = np.array([[[2.0, 0.0], [0.0, 0.0]]])
    result = Attribution("m", {}, ("a", "b"), ("x", "y"), source, prefix)
    np.testing.assert_allclose(result.source_share(), [[0.5, 0.0]])
    assert set(result.arrays()) == {"source", "prefix", "source_share", "shares", "src_tokens", "src_roles", "span",
                                    "tokens", "decoder_inputs"}
    assert result.metadata()["decoder_inputs"] == ["<sos>", "x"]
    # an encoder-decoder's source is all span: (source share, 0, the rest)
    np.testing.assert_allclose(result.shares(), [[[0.5, 0.0, 0.5], [0.0, 0.0, 0.0]]])
    assert result.roles == ("source", "source") and result.span == (0, 2)


def test_shares_split_a_prompt_into_span_instruction_and_prefix_by_magnitude():
    source = np.array([[[1.0, -2.0, 3.0, 0.5], [0.0, 0.0, 0.0, 0.0]]])  # [1, T=2, S=4]
    prefix = np.array([[[-1.5, 0.0], [0.0, 0.0]]])
    roles = ("template", "source", "source", "instruction")
    result = Attribution("m", {}, ("a", "b", "c", "d"), ("x", "y"), source, prefix, src_roles=roles)
    np.testing.assert_allclose(result.shares(), [[[5 / 8, 1.5 / 8, 1.5 / 8], [0.0, 0.0, 0.0]]])
    assert result.span == (1, 3) and result.metadata()["src_roles"] == list(roles)
    assert result.arrays()["span"].tolist() == [1, 3]
    with pytest.raises(ValueError, match="src_roles name 3 tokens, but the source has 4"):
        Attribution("m", {}, ("a", "b", "c", "d"), ("x", "y"), source, prefix, src_roles=roles[:3])
    with pytest.raises(ValueError, match="src_roles holds 'span'; a role is one of template, instruction, source"):
        Attribution("m", {}, ("a", "b", "c", "d"), ("x", "y"), source, prefix, src_roles=("span",) * 4)


def test_settings_are_validated_on_creation():
    with pytest.raises(ConfigError, match="steps must be a whole number from 1 to 1024, not 0"):
        AttributionSettings(steps=0)
    with pytest.raises(ConfigError, match="aggregate must be one of l2, sum, not 'max'"):
        AttributionSettings(aggregate="max")
    with pytest.raises(ConfigError, match="baseline must be one of zero, pad, unk"):
        AttributionSettings(baseline="mean")
    assert AttributionSettings(steps=8, foil="w3").changed() == ("steps", "foil")


def _fake(translator, src, out, settings, stop):
    yield AttributionProgress(1, 1, "fake")
    t = len(out)
    yield Attribution("fake", {}, src, out, np.ones((1, t, len(src))), np.zeros((1, t, t)))


FAKE = AttributionMethod("fake", "Fake", "ones on the source", False, _fake, settings=("steps",),
                         not_defined=lambda kind: None if kind.has_source else "it needs a source")


def test_the_registry_lists_runs_and_refuses():
    translator, lm = make_toy_translator(), make_toy_lm()
    with registered(FAKE):
        assert get_method("fake") is FAKE
        assert FAKE in methods_for(translator).defined
        assert (FAKE, "it needs a source") in methods_for(lm).undefined
        events = list(attribution_steps(translator, "fake", SRC, OUT, AttributionSettings(steps=4)))
        assert isinstance(events[0], AttributionProgress) and events[-1].source.shape == (1, 3, 4)
        with pytest.raises(InputError, match="Fake does not use foil: it reads only steps"):
            list(attribution_steps(translator, "fake", SRC, OUT, AttributionSettings(foil="w1")))
        with pytest.raises(InputError, match="Fake is not defined for a .*: it needs a source"):
            list(attribution_steps(lm, "fake", (), OUT))
        with pytest.raises(InputError, match="Nothing to attribute: the translation has no output tokens"):
            list(attribution_steps(translator, "fake", SRC, ()))
    with pytest.raises(InputError, match="unknown attribution method 'fake'; choose one of"):
        get_method("fake")


def test_the_methods_list_in_the_packages_order_whichever_module_came_first():
    """A subpackage registers its methods in its ``__init__``, so importing any of its modules first registers them
    early; the list still follows the package's order (the CLI's choices and the GUI's selector read it)."""
    import subprocess
    import sys

    listing = "from attnviz.engine.attribution.base import all_methods; print(','.join(m.name for m in all_methods()))"
    plain = subprocess.run([sys.executable, "-c", listing], capture_output=True, text=True, check=True).stdout
    early = subprocess.run([sys.executable, "-c", "import attnviz.engine.attribution.patching.corrupted\n" + listing],
                           capture_output=True, text=True, check=True).stdout
    assert plain == early
    assert plain.strip().split(",")[:3] == ["saliency", "gradient-x-input", "integrated-gradients"]
