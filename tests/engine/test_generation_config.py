"""An imported folder's generation_config.json: read into attnviz's DecodeConfig in attnviz's token ids (the
Hub's opus-mt settings: beam 4, <pad> banned, </s> forced at the limit), said by ``attnviz info``, and each bad value
refused by loading and ``info`` with one line naming the file and field; the rules it sets (bans, repeated n-grams,
forced tokens, transformers' ranking and stopping) mean what transformers makes of them."""

from __future__ import annotations

import json
import math

import pytest
import torch

from attnviz.cli.main import main
from attnviz.engine.config import DecodeConfig
from attnviz.engine.errors import CheckpointError, ConfigError
from attnviz.engine.loading import load_translator, read_card
from attnviz.engine.search.rules import banned_tokens, constrain, normalised, search_settled
from tests.folder_samples import write_marian_folder


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return write_marian_folder(tmp_path_factory.mktemp("gen") / "opus-mt-de-en")


def test_the_hubs_opus_mt_settings_read_in_attnviz_ids(folder):
    card = read_card(folder)
    assert card.decoding == DecodeConfig(beam=4, max_len=511, length_penalty=1.0, configured=True,
                                         length_rule="power", early_stopping="false", bad_words=((1,),), forced_eos=3)
    assert card.decoding_label() == ("as configured by the model (beam 4, length penalty 1 (length ** penalty), early "
                                     "stopping false, at most 511 tokens, 1 banned token sequence, forced end token)")


def test_settings_attnviz_does_not_apply_are_named(folder, tmp_path, capsys):
    copy = _edited(folder, tmp_path, repetition_penalty=1.2, do_sample=False, min_length=3)
    assert read_card(copy).decoding_label().endswith("; not applied: repetition_penalty 1.2, min_length 3")
    assert main(["info", str(copy)]) == 0
    assert "not applied: repetition_penalty 1.2, min_length 3" in capsys.readouterr().out


def test_a_folder_without_settings_decodes_with_attnvizs_own(folder, tmp_path):
    copy = _edited(folder, tmp_path)
    (copy / "generation_config.json").unlink()
    assert read_card(copy).decoding is None
    config = json.loads((copy / "config.json").read_text()) | {"num_beams": 6, "max_length": 100}
    (copy / "config.json").write_text(json.dumps(config))  # an older folder: config.json's defaults
    assert read_card(copy).decoding.beam == 6 and read_card(copy).decoding.max_len == 99


def _edited(folder, tmp_path, **changes):
    import shutil

    copy = tmp_path / "copy" / folder.name
    shutil.copytree(folder, copy)
    path = copy / "generation_config.json"
    path.write_text(json.dumps(json.loads(path.read_text()) | changes))
    return copy


@pytest.mark.parametrize("change, message", [
    ({"num_beams": -4}, "field 'num_beams' is -4, but it must be a whole number from 1 to 64"),
    ({"num_beams": "4"}, "field 'num_beams' is '4', but it must be a whole number from 1 to 64"),
    ({"max_length": 10**12}, "field 'max_length' is 1000000000000, but it must be a whole number from 2 to 100,000"),
    ({"length_penalty": "long"}, "field 'length_penalty' is 'long', but it must be a number from -100 to 100"),
    ({"no_repeat_ngram_size": True}, "field 'no_repeat_ngram_size' is True, but it must be a whole number"),
    ({"early_stopping": "sometimes"}, "field 'early_stopping' is 'sometimes', but it must be true, false or"),
    ({"bad_words_ids": [[]]}, "field 'bad_words_ids' is [[]], but it must list sequences of 1 to 64 token ids"),
    ({"bad_words_ids": [5]}, "field 'bad_words_ids' is [5], but it must list sequences"),
    ({"bad_words_ids": [[10**6]]}, "field 'bad_words_ids' is 1000000, but it must be a token id from 0 to"),
    ({"forced_bos_token_id": -1}, "field 'forced_bos_token_id' is -1, but it must be a token id"),
    ({"eos_token_id": [0, "x"]}, "field 'eos_token_id' is 'x', but it must be a token id"),
])
def test_bad_settings_are_refused_naming_file_and_field(folder, tmp_path, capsys, change, message):
    copy = _edited(folder, tmp_path, **change)
    for read in (read_card, load_translator):
        with pytest.raises(CheckpointError, match="generation_config.json: " + _pattern(message)):
            read(copy)
    assert main(["info", str(copy)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def _pattern(text: str) -> str:
    import re

    return re.escape(text)


def test_bans_and_repeated_ngrams_follow_transformers():
    decode = DecodeConfig(no_repeat_ngram=2, bad_words=((7,), (5, 6), (3,)))
    # <sos> 5 6 5: "5 6" was seen, so 6 may not follow 5 again; 7 always banned; a lone end token (3) never is
    assert banned_tokens([5, 6, 5], decode) == {6, 7}
    assert banned_tokens([4, 5], decode) == {6, 7}  # the two-token ban (5, 6)
    assert banned_tokens([], DecodeConfig(no_repeat_ngram=3)) == set()
    assert banned_tokens([4, 4], DecodeConfig(no_repeat_ngram=1)) == {2, 4}  # unigrams, counted from <sos> too
    logp = torch.log_softmax(torch.randn(2, 10), -1)
    forced = constrain(logp, [[], []], 0, 5, DecodeConfig(forced_bos=8))
    assert forced[:, 8].tolist() == [0.0, 0.0] and torch.isinf(forced[:, :8]).all()
    last = constrain(logp, [[], []], 4, 5, DecodeConfig(forced_bos=8, forced_eos=3))
    assert last[:, 3].tolist() == [0.0, 0.0]
    with pytest.raises(ConfigError, match="early_stopping must be one of"):
        DecodeConfig(early_stopping="sometimes")


def test_ranking_and_stopping_follow_transformers():
    power = DecodeConfig(beam=2, length_rule="power", length_penalty=2.0, early_stopping="false", configured=True)
    assert math.isclose(normalised(-8.0, 4, power), -0.5)  # -8 / 4 ** 2: the generated tokens, <eos> included
    assert math.isclose(normalised(-8.0, 4, DecodeConfig(length_penalty=1.0)), -8.0 / (9 / 6))
    # two finished (the worse -1.0): stop when the best live one, at its present length, cannot beat it
    assert not search_settled([-0.5], -1.0, 1, 10, power)  # fewer finished than the beam
    assert search_settled([-0.5, -1.0], -8.0, 1, 10, power)  # -8 / 2 ** 2 = -2 <= -1
    assert not search_settled([-0.5, -1.0], -3.0, 1, 10, power)  # -3 / 4 = -0.75 > -1
    never = power.replace(early_stopping="never")  # judged at the longest length: -8 / 10 ** 2 > -1
    assert not search_settled([-0.5, -1.0], -8.0, 1, 10, never)
    assert search_settled([-0.5, -1.0], -3.0, 1, 10, power.replace(early_stopping="true"))
