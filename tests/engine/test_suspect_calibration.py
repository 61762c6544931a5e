"""The calibrated suspect score (issue 38): the AUROC against a hand-computed case, a fit on pairs whose separation
is known (log-prob per token separates, Wass-to-Unif does not, sink mass points the wrong way), the explicit flags
for an output mostly <unk> or repeating itself, and a calibration measured on the toy model kept in its checkpoint's
card or beside it and read back by the verdict and the ranking."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest

from attnviz.cli.main import main
from attnviz.engine.attribution.suspect.calibrate import calibration_steps, wrong_pairs
from attnviz.engine.attribution.suspect.components import component_values, repeats
from attnviz.engine.attribution.suspect.fit import auroc, fit
from attnviz.engine.attribution.suspect.rank import SuspectRanking, SuspectRow
from attnviz.engine.attribution.suspect.rule import FALLBACK_LINE, Calibration, describe, judge
from attnviz.engine.attribution.suspect.store import calibration_of, sidecar_path, store_calibration
from attnviz.engine.checkpoints.store import load_tensors
from attnviz.engine.errors import InputError
from attnviz.engine.loading import load_translator
from attnviz.engine.text.vocab import EOS_ID, SOS_ID
from tests.helpers import make_toy_lm, toy_pair


def test_auroc_against_a_hand_computed_case():
    # wrong 0.9 beats all three good; 0.4 beats 0.1 and 0.3 and ties 0.4 (half); 0.6 beats all three: 8.5 of 9
    suspicion = [0.9, 0.4, 0.6, 0.1, 0.4, 0.3, math.nan]
    bad = [True, True, True, False, False, False, True]
    assert auroc(suspicion, bad) == pytest.approx(8.5 / 9)
    assert auroc([1, 2, 3, 4], [False, False, True, True]) == 1.0
    assert auroc([1, 2, 3, 4], [True, True, False, False]) == 0.0
    assert auroc([5, 5, 5], [True, False, False]) == 0.5
    assert math.isnan(auroc([1, 2], [True, True]))


def test_repeats_and_the_unk_share_of_an_output():
    assert repeats("a man a man a man .".split()) == 3
    assert repeats("a dog and a cat".split()) == 1 and repeats([]) == 0
    assert repeats("x y z w v x y z w v".split()) == 2  # a 5-token sequence said twice
    tokens = ["<unk>"] * 6 + ["a", "dog", "runs", "."] + ["<eos>"]
    found = component_values(np.log(np.full(11, 0.9)), np.full((11, 5), 0.2), ("<sos>", "a", "b", "c", "<eos>"),
                             tgt_tokens=tokens)
    assert found["unk_share"] == pytest.approx(0.6) and found["repeats"] == 1.0


def _known_rows(seed: int = 0) -> list[tuple[str, dict[str, float]]]:
    """Pairs where log-prob per token separates perfectly (good -2.6..-0.2, wrong -6..-3), Wass-to-Unif is drawn
    the same for both, sink mass is higher on the good pairs (the wrong way) and ALTI+ is not defined."""
    rng, rows = random.Random(seed), []
    for kind in ("own translation", "human reference", "other sentence", "half replaced", "repetition"):
        good = kind in ("own translation", "human reference")
        for _ in range(60):
            rows.append((kind, {"mean_logprob": rng.uniform(-2.6, -0.2) if good else rng.uniform(-6, -3),
                                "attn_ign_src": rng.random(), "wass_to_unif": rng.random(),
                                "sink_mass": rng.uniform(0.5, 1) if good else rng.uniform(0, 0.5),
                                "alti_source_share": math.nan, "seq_logprob": -10.0, "unk_share": 0.0,
                                "repeats": 1.0}))
    return rows


def test_a_fit_where_the_separation_is_known_keeps_a_human_reference_unflagged():
    calibration = fit(_known_rows(), "toy pairs")
    fits = calibration.components
    assert fits["mean_logprob"].auroc == 1.0 and fits["mean_logprob"].weight == 1.0
    assert 0.35 < fits["wass_to_unif"].auroc < 0.65 and fits["wass_to_unif"].weight == 0.0
    assert fits["sink_mass"].auroc == 0.0 and "never voted" in fits["sink_mass"].note
    assert math.isnan(fits["alti_source_share"].auroc)
    assert fits["alti_source_share"].note == "not defined for this model"
    assert calibration.rule == "mean_logprob" and calibration.auroc == 1.0
    assert -3.0 < calibration.components["mean_logprob"].line < -2.3  # 5% of each good kind's pairs past it
    assert calibration.flagged["human reference"] <= 0.05 and calibration.flagged["other sentence"] == 1.0
    reference = {"mean_logprob": -2.3, "attn_ign_src": 0.9, "wass_to_unif": 0.9, "sink_mass": 0.9,
                 "alti_source_share": 0.1, "unk_share": 0.0, "repeats": 1.0}  # the old -2.0 line flagged this
    verdict = judge(reference, calibration)
    assert not verdict.suspect and verdict.text().startswith("no sign of a hallucination (calibrated score")
    wrong = judge(reference | {"mean_logprob": -4.0}, calibration)
    assert wrong.suspect and "log-prob / token -4.00 below" in wrong.text()
    told = describe(calibration)
    assert "log-prob / token: AUROC 1.000 (other sentence 1.00, half replaced 1.00, repetition 1.00): decides alone" \
        in "\n".join(told)
    assert any(t.startswith("sink mass: AUROC 0.000 (") and "shown, never voted" in t for t in told)
    stored = json.loads(json.dumps(calibration.to_dict(), allow_nan=False))  # NaN is kept as null
    assert Calibration.from_dict(stored).to_dict() == calibration.to_dict()


def test_too_few_pairs_are_refused_with_the_kinds_named():
    rows = [row for row in _known_rows() if row[0] != "repetition"][:200]
    with pytest.raises(InputError, match=r"at least 10 pairs of each kind; too few: repetition \(0\)"):
        fit(rows, "toy pairs")


@pytest.mark.parametrize("calibrated", [False, True])
def test_the_verdict_flags_an_unk_heavy_output_and_a_repetition(calibrated):
    calibration = fit(_known_rows(), "toy pairs") if calibrated else None
    fine = {"mean_logprob": -0.3, "unk_share": 0.0, "repeats": 1.0, "wass_to_unif": 0.1}
    assert not judge(fine, calibration).suspect
    unk = judge(fine | {"unk_share": 0.6}, calibration)
    assert unk.suspect and unk.text() == "suspect: 60% of the output tokens are <unk>"
    repeated = judge(fine | {"repeats": 4.0}, calibration)
    assert repeated.suspect and repeated.reasons == ("a sequence repeated 4 times in a row",)
    low = judge(fine | {"mean_logprob": FALLBACK_LINE - 0.1}, None)
    assert low.suspect and "(not calibrated)" in low.text()


def test_wrong_pairs_are_built_from_the_own_translation():
    own, other = (SOS_ID, 10, 11, 12, 13, EOS_ID), (SOS_ID, 20, 21, 22, EOS_ID)
    built = wrong_pairs(own, other, 100)
    assert built == {"other sentence": (SOS_ID, 20, 21, 22, EOS_ID),
                     "half replaced": (SOS_ID, 10, 11, 21, 22, EOS_ID),
                     "repetition": (SOS_ID, 10, 11, 10, 11, 10, 11, EOS_ID)}
    assert wrong_pairs(own, other, 4)["repetition"] == (SOS_ID, 10, 11, 10, 11, EOS_ID)


def _toy_corpus(n: int = 24) -> tuple[list[str], list[str]]:
    rng = random.Random(5)
    pairs = [toy_pair(rng) for _ in range(n)]
    return [" ".join(s) for s, _ in pairs], [" ".join(t) for _, t in pairs]


@pytest.fixture()
def toy_calibration(trained_translator):
    sources, references = _toy_corpus()
    events = list(calibration_steps(trained_translator, sources, references, corpus="toy"))
    assert events[0].phase == "decoding" and events[-2].phase == "scoring"
    return events[-1]


def test_calibration_on_the_toy_model_is_kept_in_its_card_and_read_back(trained_translator, toy_calibration,
                                                                       tmp_path):
    assert toy_calibration.pairs["own translation"] == 24 and toy_calibration.corpus == "toy, 24 sentences"
    assert toy_calibration.components["mean_logprob"].auroc > 0.9  # the toy model learnt its mapping
    path = tmp_path / "toy.safetensors"
    trained_translator.save(path, name="toy")
    before = load_tensors(path)
    assert store_calibration(path, toy_calibration) == path
    after = load_tensors(path)
    assert after[0]["suspect_calibration"]["rule"] == toy_calibration.rule
    assert {k: v.tolist() for k, v in after[1].items()} == {k: v.tolist() for k, v in before[1].items()}
    assert {k: v for k, v in after[0].items() if k != "suspect_calibration"} == before[0]
    calibration, where = calibration_of(load_translator(path))
    assert where == "kept in the checkpoint" and calibration.to_dict() == toy_calibration.to_dict()
    assert not list(tmp_path.glob(".*.tmp"))  # written atomically, nothing left over


def test_a_calibration_beside_the_model_is_checked_against_its_weights(trained_translator, toy_calibration,
                                                                      tmp_path):
    path = tmp_path / "toy.safetensors"
    trained_translator.save(path, name="toy")
    side = store_calibration(path, toy_calibration, beside=True)
    assert side == sidecar_path(path) == tmp_path / "toy.suspect.json"
    calibration, where = calibration_of(load_translator(path))
    assert where == "kept beside the model in toy.suspect.json"
    assert calibration is not None and calibration.to_dict()["components"] == toy_calibration.to_dict()["components"]
    trained_translator.save(path, name="toy, saved again")  # other metadata: other weights as far as it can tell
    calibration, where = calibration_of(load_translator(path))
    assert calibration is None and where == "toy.suspect.json was made for other weights than these; run attnviz " \
                                            "calibrate again"
    side.write_text("{not json")
    calibration, where = calibration_of(load_translator(path))
    assert calibration is None and where.startswith("toy.suspect.json cannot be read (")


def test_the_ranking_reads_the_calibration_and_says_when_there_is_none():
    calibration = fit(_known_rows(), "toy pairs")
    rows = [SuspectRow(1, "a", "A", {"mean_logprob": -0.5, "unk_share": 0.0, "repeats": 1.0}),
            SuspectRow(2, "b", "B", {"mean_logprob": -4.0, "unk_share": 0.0, "repeats": 1.0}),
            SuspectRow(3, "c", "C", {"mean_logprob": -0.2, "unk_share": 0.5, "repeats": 1.0})]
    ranked = SuspectRanking.of(rows, "toy", calibration=calibration, where="kept in the checkpoint")
    assert [r.line for r in ranked.rows] == [2, 3, 1]  # flagged first (by score), then the rest
    assert [r.flagged for r in ranked.rows] == [True, True, False]
    assert ranked.rows[1].verdict == "suspect: 50% of the output tokens are <unk>"
    assert ranked.how.startswith("calibrated on toy pairs") and ranked.records()[0]["verdict"].startswith("suspect")
    plain = SuspectRanking.of(rows, "toy")
    assert plain.how.startswith("not calibrated: combined = the suspicion percentile of log-prob per token")
    assert [r.combined for r in plain.rows] == [1.0, 0.0, 0.5]  # ranks of low log-prob, flagged rows first


def test_the_calibrate_command_keeps_it_and_prints_each_auroc(trained_translator, tmp_path, capsys):
    path = tmp_path / "toy.safetensors"
    trained_translator.save(path, name="toy")
    sources, references = _toy_corpus()
    (tmp_path / "src.txt").write_text("\n".join(sources) + "\n")
    (tmp_path / "ref.txt").write_text("\n".join(references) + "\n")
    files = ["--src", str(tmp_path / "src.txt"), "--ref", str(tmp_path / "ref.txt")]
    assert main(["calibrate", "-m", str(path), *files, "--beside"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Calibrated on src.txt / ref.txt, 24 sentences (")
    assert "log-prob / token: AUROC " in out and "sink mass: AUROC " in out and "shown, never voted" in out
    assert (tmp_path / "toy.suspect.json").is_file()
    assert main(["calibrate", "-m", str(path), *files, "--json", "--no-store"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["kept_in"] is None and set(data["components"]) >= {"mean_logprob", "wass_to_unif"}
    assert main(["calibrate", "-m", str(path), "--src", str(tmp_path / "src.txt")]) == 2
    assert "give --src and --ref" in capsys.readouterr().err


def test_a_language_model_is_refused_before_any_corpus_is_read(tmp_path, capsys):
    lm = tmp_path / "lm.safetensors"
    make_toy_lm().save(lm, name="letters")
    assert main(["calibrate", "-m", str(lm), "--split", "test", "--data-dir", str(tmp_path / "nowhere")]) == 2
    assert capsys.readouterr().err == ("attnviz: error: The suspect score reads a translation's source; a language "
                                       "model has none to calibrate.\n")



def test_the_bundled_de_en_model_carries_a_calibration_made_for_its_weights():
    from attnviz.paths import models_dir

    translator = load_translator(models_dir() / "de-en-multi30k.safetensors")
    calibration, where = calibration_of(translator)
    assert where == "kept beside the model in de-en-multi30k.suspect.json"
    assert calibration is not None and calibration.corpus == "val split, 1014 sentences"
    assert calibration.components["mean_logprob"].auroc > 0.95 and calibration.pairs["human reference"] == 1014
    assert calibration.flagged["human reference"] <= 0.05 + 1e-9


def test_every_bundled_translation_model_carries_a_calibration_for_its_weights():
    from attnviz.paths import models_dir

    sides = sorted(models_dir().glob("*.suspect.json"))
    assert [s.name for s in sides] == ["de-en-lstm-multi30k.suspect.json", "de-en-multi30k.suspect.json",
                                       "en-de-multi30k.suspect.json", "fr-en-multi30k.suspect.json",
                                       "fr-en-tatoeba-small.suspect.json"]
    for side in sides:
        calibration, where = calibration_of(load_translator(side.with_name(side.name.replace(".suspect.json",
                                                                                             ".safetensors"))))
        assert calibration is not None and where == f"kept beside the model in {side.name}", where
        assert calibration.components["mean_logprob"].auroc > 0.9, side.name
