"""The inference device option (``load_translator(..., device=)``, ``--device``): the CPU by default, as before; a
CUDA GPU for a decoder-only LLM; ``cuda`` refused in one line without a GPU or for a kind that decodes on the CPU
only. What runs on a GPU is measured by ``benchmarks/gpu_check.sh`` there; here the CPU's side is checked."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnviz.cli.main import main
from attnviz.engine.config import DecodeConfig
from attnviz.engine.errors import CheckpointError, InputError
from attnviz.engine.kinds import get_kind
from attnviz.engine.loading import load_translator
from attnviz.engine.translator import resolve_device
from tests.llm_folder import make_llm_folder

NO_GPU = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without a CUDA GPU")
SENTENCE = "Der Hund läuft schnell über die Straße."
NO_GPU_MESSAGE = (f"device 'cuda' was asked but torch {torch.__version__} sees no CUDA GPU on this machine; run on "
                  "the CPU (device cpu), or auto (the GPU when there is one).")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return make_llm_folder(tmp_path_factory.mktemp("llm"), "qwen2")


def _maps(translation) -> list[np.ndarray]:
    return [translation.attention[kind] for kind in ("encoder", "cross", "decoder")]


def test_cpu_is_the_default_and_decodes_exactly_as_before(folder):
    before = load_translator(folder, "float32")  # no device named: what every caller gets
    on_cpu = load_translator(folder, "float32", device="cpu")
    assert before.device == on_cpu.device == "cpu"
    decode = DecodeConfig(max_len=8)
    first, second = before.translate(SENTENCE, decode), on_cpu.translate(SENTENCE, decode)
    assert first.tokens == second.tokens and len(first.tokens) > 1
    assert first.probabilities == second.probabilities
    for a, b in zip(_maps(first), _maps(second), strict=True):
        assert a.shape == b.shape and np.array_equal(a, b)
    # the step-by-step events (the cached steps) agree with decoding the whole prefix again at every step
    steps = [e for e in on_cpu.steps(SENTENCE, decode)][1:]
    again = [e for e in on_cpu.steps(SENTENCE, decode, recompute=True)][1:]
    assert [s.token_id for s in steps] == [s.token_id for s in again]
    assert [s.token for s in steps] == list(first.tokens)


@NO_GPU
def test_auto_runs_on_the_cpu_without_a_gpu(folder):
    translator = load_translator(folder, "float32", device="auto")
    assert translator.device == "cpu"
    assert translator.translate(SENTENCE, DecodeConfig(max_len=4)).tokens


@NO_GPU
def test_cuda_is_refused_without_a_gpu_before_anything_is_read(folder):
    with pytest.raises(CheckpointError) as caught:
        load_translator(folder, device="cuda")
    assert str(caught.value) == NO_GPU_MESSAGE
    with pytest.raises(CheckpointError, match="sees no CUDA GPU"):
        load_translator("models/de-en-multi30k.safetensors", device="cuda")


def test_a_device_name_attnviz_does_not_know_is_refused(folder):
    with pytest.raises(InputError) as caught:
        load_translator(folder, device="gpu")
    assert str(caught.value) == "unknown device 'gpu': choose one of cpu, cuda, auto"


def test_only_an_llm_goes_to_the_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # as on a GPU machine
    transformer, llm = get_kind("transformer"), get_kind("llm")
    assert resolve_device("cuda", llm) == resolve_device("auto", llm) == torch.device("cuda")
    assert resolve_device("auto", transformer) == torch.device("cpu")  # auto: the GPU only where it decodes there
    with pytest.raises(CheckpointError) as caught:
        resolve_device("cuda", transformer)
    assert str(caught.value) == ("a Transformer encoder-decoder decodes on the CPU only in attnviz (device cuda is for "
                                 "decoder-only LLMs); run it on the CPU (device cpu or auto).")


@NO_GPU
def test_the_command_line_says_why_cuda_cannot_run(folder, capsys):
    assert main(["translate", "-m", str(folder), "--device", "cuda", SENTENCE]) == 1
    assert capsys.readouterr().err.strip() == f"attnviz: error: {NO_GPU_MESSAGE}"
    assert main(["translate", "-m", str(folder), "--device", "cpu", "--max-len", "4", SENTENCE]) == 0
    assert capsys.readouterr().out.strip()
    with pytest.raises(SystemExit) as exited:
        main(["generate", "-m", "models/names-char.safetensors", "--device", "gpu"])
    assert exited.value.code == 2
    assert "argument --device: expected one of cpu, cuda, auto, not 'gpu'" in capsys.readouterr().err


def test_every_analysis_refuses_a_model_on_a_gpu_in_one_line(monkeypatch):
    """On a GPU attnviz only decodes: each analysis entry says so, naming itself and the device, before it reads
    anything (the device is faked: no GPU here)."""
    from attnviz.engine.analysis.alignment import align_steps
    from attnviz.engine.analysis.importance import importance_steps
    from attnviz.engine.analysis.run import head_stats_steps
    from attnviz.engine.attribution.base import attribution_steps
    from attnviz.engine.attribution.lens_languages import lens_language_steps
    from attnviz.engine.attribution.suspect.corpus import suspect_sentence, suspect_steps
    from attnviz.engine.translator import Translator
    from tests.helpers import make_toy_translator

    translator = make_toy_translator(seed=1)
    monkeypatch.setattr(Translator, "device", property(lambda self: "cuda:0"))
    calls = {
        "Saliency": lambda: next(attribution_steps(translator, "saliency", ["w1"], ["x1"])),
        "The logit lens": lambda: next(lens_language_steps(translator, ["w1 w2"])),
        "The suspect score": lambda: suspect_sentence(translator, "w1 w2"),
        "Head statistics": lambda: next(head_stats_steps(translator, ["w1 w2"])),
        "Word alignment": lambda: next(align_steps(translator, ["w1 w2"], ["x1 x2"])),
        "Head importance": lambda: next(importance_steps(translator, [("w1 w2", "x1 x2")])),
    }
    for what, call in calls.items():
        with pytest.raises(InputError) as refused:
            call()
        assert str(refused.value) == (f"{what} runs on the CPU, and this model is on cuda:0: move it back first "
                                      "(translator.to_device('cpu')); on a GPU attnviz only decodes (translate, "
                                      "generate).")
    with pytest.raises(InputError, match="The suspect score runs on the CPU"):
        next(suspect_steps(translator, ["w1 w2"]))
