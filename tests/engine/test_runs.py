"""Finding a run from any of its files, and reading its training-state file without torch."""

import pytest

from attnviz.engine.errors import CheckpointError
from attnviz.engine.training.runs import RunPaths, read_run_state, run_checkpoint


@pytest.mark.parametrize("name", ["run.safetensors", "run.last.safetensors", "run.state.safetensors",
                                  "run.epoch12.safetensors"])
def test_every_file_of_a_run_leads_to_its_checkpoint(tmp_path, name):
    assert run_checkpoint(tmp_path / name) == tmp_path / "run.safetensors"
    paths = RunPaths(run_checkpoint(tmp_path / name))
    assert paths.state == tmp_path / "run.state.safetensors" and paths.epoch(3).name == "run.epoch3.safetensors"


def test_a_name_that_only_looks_like_an_epoch_is_its_own_run(tmp_path):
    assert run_checkpoint(tmp_path / "my.epochal.safetensors") == tmp_path / "my.epochal.safetensors"


def test_a_run_without_state_cannot_be_resumed(tmp_path):
    with pytest.raises(CheckpointError, match="training-state file .*run.state.safetensors does not exist"):
        read_run_state(tmp_path / "run.safetensors")
