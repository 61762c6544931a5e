"""``attnviz translate`` without ``-m`` uses the default bundled model; ``--max-len`` truncation is reported;
``evaluate --split test`` reads only the test files."""

import json
import shutil
import subprocess
import sys

import pytest

from attnviz.cli.main import main
from attnviz.engine.corpus.reader import load_split
from attnviz.engine.training.presets import get_preset
from attnviz.paths import default_model_path


def test_translate_without_a_model_uses_the_default_bundled_one(capsys):
    if default_model_path() is None:
        pytest.skip("no bundled model in this checkout")
    assert main(["translate", "--json", "Ein Hund rennt."]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["text"] and "default model" in captured.err


def test_max_len_truncation_is_reported(tmp_path, trained_translator):
    path = tmp_path / "toy.safetensors"
    trained_translator.save(path, name="toy")
    out = subprocess.run([sys.executable, "-m", "attnviz", "translate", "-m", str(path), "--max-len", "2",
                          "q1 q2 q3 q4", "q5"], check=False, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines == ["w4 w3", "w5"]
    assert out.stderr.count("reached the limit of 2 tokens") == 1  # only the sentence that was cut


def test_evaluating_the_test_split_needs_no_training_files(tmp_path, data_dir):
    spec = get_preset("multi30k-de-en").corpus
    for name in ("multi30k_test_2016_flickr.de.gz", "multi30k_test_2016_flickr.en.gz"):
        shutil.copy(data_dir / name, tmp_path / name)
    pairs = load_split(spec, tmp_path, "test")
    assert len(pairs) == 1000 and all(src and tgt for src, tgt in pairs[:5])
    with pytest.raises(Exception, match="multi30k_val"):
        load_split(spec, tmp_path, "val")
