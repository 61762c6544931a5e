from collections import Counter

import pytest

from attnviz.engine.errors import ConfigError
from attnviz.engine.text.vocab import EOS_ID, PAD_ID, SOS_ID, SPECIALS, UNK_ID, Vocab


def test_specials_have_fixed_ids():
    v = Vocab.build([["b", "a"]])
    assert [v.id(s) for s in SPECIALS] == [UNK_ID, PAD_ID, SOS_ID, EOS_ID] == [0, 1, 2, 3]


def test_order_is_frequency_then_alphabet_and_min_freq_filters():
    v = Vocab.build(Counter({"c": 3, "b": 2, "a": 2, "rare": 1}), min_freq=2)
    assert v.to_list()[4:] == ["c", "a", "b"]
    assert "rare" not in v and len(v) == 7


def test_max_size_counts_specials():
    v = Vocab.build(Counter({"x": 5, "y": 4, "z": 3}), max_size=6)
    assert v.to_list() == [*SPECIALS, "x", "y"]
    with pytest.raises(ConfigError, match="specials"):
        Vocab.build(Counter({"x": 1}), max_size=2)


def test_encode_maps_unknown_to_unk_and_adds_boundaries():
    v = Vocab.build([["hund"]])
    assert v.encode(["hund", "katze"], add_sos_eos=True) == [SOS_ID, 4, UNK_ID, EOS_ID]


def test_decode_stops_at_eos_and_skips_sos_and_pad():
    v = Vocab.build([["a", "b"]])
    ids = [SOS_ID, v.id("a"), PAD_ID, v.id("b"), EOS_ID, v.id("a")]
    assert v.decode(ids) == ["a", "b"]
    assert v.decode(ids, strip_specials=False)[-2:] == ["<eos>", "a"]


def test_round_trip_through_plain_list():
    v = Vocab.build([["ein", "hund", "ein"]])
    assert Vocab.from_list(v.to_list()) == v


@pytest.mark.parametrize("itos,message", [
    (["a", "<unk>", "<pad>", "<sos>", "<eos>"], "start with the specials"),
    ([*SPECIALS, "a", "a"], "repeat"),
    ([*SPECIALS, ""], "non-empty"),
])
def test_invariants_are_checked(itos, message):
    with pytest.raises(ConfigError, match=message):
        Vocab(itos)
