"""The benchmark scripts still run against the code they measure: each at its smallest size, its JSON read back.

Speed is never asserted here (the machines are shared and noisy); what is checked is that a script runs to the end
and reports what it says it measures, so a rename in the package cannot silently break a benchmark.
"""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# Each benchmark runs at toy size in a subprocess with a generous limit: a loaded machine may be many times slower
# than a quiet one, and speed is never what these tests check.
pytestmark = pytest.mark.timeout(900)
SUBPROCESS_LIMIT_S = 840

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def bench(name: str, *args: str, data: bool = False) -> dict:
    env = {k: v for k, v in os.environ.items() if data or k != "ATTNVIZ_DATA"} | {"QT_QPA_PLATFORM": "offscreen"}
    out = subprocess.run([sys.executable, str(BENCHMARKS / f"{name}.py"), *args], capture_output=True, text=True,
                         timeout=SUBPROCESS_LIMIT_S, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


def test_decode_benchmark_reports_cached_and_beam_figures():
    report = bench("bench_decode", "--tokens", "3", "--repeats", "1", "--sentences", "4", "--threads", "1",
                   "--no-marian", "--explore", "1")
    assert report["output_tokens"] == 3 and report["batch_sentences"] == 4 and report["explore_sentences"] == 1
    assert report["steps_cached_ms_median"] > 0 and report["beam5_tree_nodes_first5"][0] >= 5


def test_decode_benchmark_measures_an_llm_shape_against_transformers(tmp_path, monkeypatch):
    pytest.importorskip("transformers")
    monkeypatch.setenv("ATTNVIZ_BENCH_CACHE", str(tmp_path))
    report = bench("bench_decode", "--large", "tiny", "--tokens", "4", "--repeats", "1", "--threads", "1")
    ours, theirs = report["attnviz"], report["transformers_eager_output_attentions"]
    assert ours["tokens"] == theirs["tokens"] and ours["prompt_tokens"] == theirs["prompt_tokens"] > 10
    assert all(value > 0 for value in report["attnviz_over_transformers"].values())
    assert report["device"] == "cpu" and "peak_gpu_mib" not in ours  # GPU memory only on --device cuda


def test_the_gpu_check_runs_every_part_at_toy_size(tmp_path, data_dir):
    """``gpu_check.sh --tiny`` on the CPU: what the lead runs once on a lent GPU machine, every part at toy size, on
    Multi30k pre-tokenized as the carried folder holds it (spaCy's tokens; the GPU machine has no spaCy)."""
    pytest.importorskip("transformers")
    tokenized, out = tmp_path / "data", tmp_path / "out"
    written = bench("bench_train", "--write-tokenized", str(tokenized), data=True)["written"]
    assert written["multi30k_train.de.gz"] == 29_000 and written["multi30k_test_2016_flickr.en.gz"] == 1_000
    env = dict(os.environ, OUT=str(out), PYTHON=sys.executable, GPU_CHECK_DATA=str(tokenized),
               ATTNVIZ_BENCH_CACHE=str(tmp_path / "cache"), TMPDIR=str(tmp_path))
    done = subprocess.run(["bash", str(BENCHMARKS / "gpu_check.sh"), "--tiny"], capture_output=True, text=True,
                          timeout=SUBPROCESS_LIMIT_S, env=env, cwd=BENCHMARKS.parent)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    status = (out / "status.txt").read_text()
    assert '"torch": "' in status and '"gpu": null' in status  # the machine's facts (no GPU here)
    parts = [line for line in status.splitlines() if ": exit " in line]
    assert [line.split(":")[0] for line in parts] == ["parity.json", "llm-tiny.json", "train.json", "big-train.txt",
                                                      "big-bleu.json"]
    assert all(": exit 0, " in line for line in parts), parts
    assert len(list(out.iterdir())) <= 8  # what the device tool brings back
    parity = json.loads((out / "parity.json").read_text())
    assert parity["device"] == "cpu" and parity["all_same"] and parity["greedy"]["largest_map_difference"] == 0.0
    llm = json.loads((out / "llm-tiny.json").read_text())
    assert llm["device"] == "cpu" and llm["attnviz"]["tokens"] == llm["transformers_eager_output_attentions"]["tokens"]
    assert json.loads((out / "train.json").read_text())["processes"]["cpu"]["1 process"]["tokens_per_s"] > 0
    bleu = json.loads((out / "big-bleu.json").read_text())
    assert bleu["de-en-big.last.safetensors"]["config"]["d_model"] == 32 and bleu["split"] == "test"
    assert bleu["de-en-multi30k.safetensors"]["sentences"] == 20 and bleu["de-en-multi30k.safetensors"]["bleu_tok"] > 10


def test_probe_overhead_benchmark_pairs_two_versions_of_the_code():
    root = str(BENCHMARKS.parent)  # this checkout against itself: both versions load and decode side by side
    report = bench("bench_probe_overhead", "--before", root, "--repeats", "2", "--tokens", "3", "--no-marian")
    figures = report["bundled_de_en"]
    assert report["tokens"] == 3 and "marian_sized" not in report
    assert figures["before_ms_per_step_median"] > 0 and figures["after_ms_per_step_median"] > 0
    assert figures["paired_ratio_median"] > 0 and len(figures["paired_ratio_quartiles"]) == 3


def test_gui_benchmark_drives_the_translate_tab_to_the_end():
    report = bench("bench_gui", "--tokens", "3")  # no ATTNVIZ_DATA: the Train tab part says it was skipped
    assert report["output_tokens"] == 3 and report["attention_kind"] == "cross" and report["grid_maps"] == 3 * 8
    assert report["beam_search"]["beam"] == 5 and 1 <= report["beam_search"]["steps"] <= 3
    assert "skipped" in report["training"]


@pytest.mark.data
def test_heads_benchmark_measures_statistics_and_alignment(data_dir):
    report = bench("bench_heads", "--threads", "1", "--limit", "8", data=True)
    assert report["sentences"] == 8 and report["threads"] == 1
    assert report["align_all_heads_with_aer_s"] >= 0 and report["best_proxy_head"].startswith("L")


def test_train_benchmark_imports_what_it_measures():
    spec = importlib.util.spec_from_file_location("bench_train", BENCHMARKS / "bench_train.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # a full run reads the corpus for half a minute: its imports are what moves
    assert callable(module.main) and callable(module.measure)


def test_info_benchmark_times_info_on_a_folder_and_a_file():
    report = bench("bench_info", "--size", "tiny", "--repeats", "1")
    assert report["size"] == "tiny" and report["weights_mib"] > 0
    assert all(report[f"info{c}_{n}_s_median"] > 0 for c in ("", "_check") for n in ("folder", "file"))


def test_loading_benchmark_reports_opening_and_cold_translate_figures():
    report = bench("bench_loading", "--size", "tiny", "--repeats", "1", "--no-transformers")
    assert report["size"] == "tiny" and report["repeats"] == 1 and report["ratios"] == {}
    opened, cold = report["attnviz"], report["attnviz_cold_translate"]
    assert opened["open_s_median"] > 0 and opened["first_token_s_median"] > 0 and opened["peak_mib_median"] > 50
    # a plain translate of a MarianMT folder runs on the numpy runtime: no torch, so tens of MiB, not hundreds
    assert cold["wall_s_median"] > opened["open_s_median"] and 10 < cold["peak_mib_median"] < opened["peak_mib_median"]


def test_attribution_benchmark_times_every_registered_method():
    report = bench("bench_attribution", "--repeats", "1", "--steps", "2", "--tokens", "3", "--threads", "1",
                   "--no-marian")
    methods = report["bundled"]["methods"]
    assert {"saliency", "gradient-x-input", "integrated-gradients", "logit-lens"} <= set(methods)
    assert methods["integrated-gradients"]["steps"] == 2 and report["bundled"]["output_tokens"] == 3
    assert all(figure["s_median"] > 0 for figure in methods.values())


def test_attribution_benchmark_measures_an_llm_shape_beside_the_bundled_model():
    pytest.importorskip("transformers")
    report = bench("bench_attribution", "--repeats", "1", "--steps", "2", "--tokens", "3", "--threads", "1",
                   "--llm", "tiny", "--only", "gradient-x-input,patching,logit-lens")
    llm = report["llm"]
    assert llm["model"] == "tiny-shaped, random weights (float32)" and llm["output_tokens"] == 3
    assert llm["methods"]["gradient-x-input"]["cpu_s_median"] > 0 and llm["methods"]["patching"]["s_median"] > 0
    assert llm["methods"]["saliency"] == {"skipped": "not in --only"} and "logit-lens" in llm["methods"]
    assert set(llm["targets_cpu_s"]) == {"gradient-x-input", "alti-plus"} and "marian_sized" not in report
    assert report["bundled"]["methods"]["gradient-x-input"]["s_median"] > 0


def test_peers_benchmark_measures_every_figure_at_toy_size(tmp_path):
    """The side-by-side script on a toy folder it builds with transformers (CTranslate2 only where it imports)."""
    pytest.importorskip("transformers")
    pytest.importorskip("sentencepiece")
    report = bench("bench_peers", "--size", "small", "--folder", str(tmp_path / "marian"), "--repeats", "1",
                   "--open-repeats", "1", "--sentences", "3", "--tokens", "3", "--baseline", str(BENCHMARKS.parent))
    assert report["size"]["d_model"] == 32 and report["tokens"] == 3
    assert {"greedy_vs_transformers", "beam5_vs_transformers", "batch_vs_transformers", "beam5_plain_vs_captured",
            "greedy_plain_vs_captured"} <= set(report["ratios"])
    assert report["ms_median"]["batch_int8/attnviz"] > 0 and report["ms_median"]["beam5_plain/attnviz"] > 0
    assert report["open_attnviz"]["peak_mib"] > 0 and report["open_baseline"]["open_s"] > 0
    assert len(report["decoding_load_average"]) == 3 and len(report["opening_load_average"]) == 3
    opening = report["opening_ratios"]  # every opening ratio the issues set a target for, from the same run
    peers = {"cold_translate_vs_ctranslate2", "peak_vs_ctranslate2", "cold_peak_vs_ctranslate2"}  # where CTranslate2
    # imports (the peers extra)
    assert set(opening) - peers == {"open_peak_vs_transformers", "cold_translate_vs_transformers",
                                    "open_time_vs_baseline"}
    assert all(opening[key] > 0 and key in report["targets"] for key in opening)
    floor = report["step_vs_floor"]
    assert floor["floor_same_tokens"] and floor["ratio"] > 0  # the floor decodes what attnviz decodes


@pytest.mark.data
def test_suspect_calibration_benchmark_reports_each_components_auroc(data_dir):
    report = bench("bench_suspect_calibration", "--limit", "16", "--test-limit", "12", data=True)
    assert report["pairs"]["own translation"] == 16 and report["test_pairs"] >= 2 * 12
    assert set(report["auroc"]) >= {"mean_logprob", "attn_ign_src", "sink_mass", "wass_to_unif", "alti_source_share"}
    assert all(0 <= v <= 1 for v in report["auroc"].values()) and report["rule"] in (*report["auroc"], "weighted")
    assert "never voted" in report["votes"]["sink_mass"] and "stored" not in report
    assert set(report["flagged_test_calibrated"]) == set(report["pairs"])


def test_stop_benchmark_stops_a_run_while_its_data_is_prepared():
    report = bench("bench_stop", "--pairs", "3000", "--repeats", "1", "--after", "0.05")
    assert report["corpus"] == "synthetic 3,000 (whitespace)" and report["repeats"] == 1
    assert report["events"] in (["TrainNote"], ["TrainStarted", "CheckpointSaved", "TrainStopped"])  # a fast machine
    assert report["ended_after_stop_s_median"] >= 0


def test_batch_size_benchmark_compares_every_size_with_the_default(tmp_path):
    """The batch sizes ``translate`` defaults to, per precision, on a toy folder built with transformers."""
    pytest.importorskip("transformers")
    pytest.importorskip("sentencepiece")
    report = bench("bench_batch_size", "--size", "small", "--folder", str(tmp_path / "marian"), "--repeats", "1",
                   "--sentences", "5", "--tokens", "3", "--sizes", "2,4")
    for name in ("float32", "int8"):
        figures = report[name]
        # the sizes asked and both precisions' defaults, each timed against this precision's own default
        assert {"2", "4", *(str(report["default"][n]) for n in ("float32", "int8"))} == set(figures)
        assert figures[str(report["default"][name])]["vs_default"] == 1.0
        assert all(f["s_median"] >= 0 and f["vs_default"] > 0 for f in figures.values())
    assert len(report["load_average"]) == 3


@pytest.mark.real_weights
def test_real_weights_benchmark_measures_both_sides_on_the_same_gguf_file():
    pytest.importorskip("transformers")
    report = bench("bench_real", "--model", "smollm2", "--tokens", "2", "--repeats", "1", "--rounds", "1",
                   "--threads", "1")
    model = report["models"][0]
    assert model["model"].endswith(".gguf") and model["attnviz"]["ms_per_token"] > 0
    assert set(model["attnviz_over_transformers"]) == {"load_s", "first_token_ms", "ms_per_token", "peak_rss_mib"}
