"""What each rank takes of an epoch, the precision setting, and a single process left as it was."""

import pytest

from attnviz.engine.config import TrainConfig
from attnviz.engine.errors import ConfigError
from attnviz.engine.events import TrainNote, TrainStarted
from attnviz.engine.training.distributed import Ranks, join, world_size
from attnviz.engine.training.loop import train
from tests.engine.test_training import overfit_recipe


def test_ranks_take_equal_shares_from_the_global_position():
    two = [Ranks(rank, 2) for rank in range(2)]
    assert list(two[0].steps(7, 0)) == [0, 2, 4]  # the 7th batch is left out: both ranks take 3 steps
    taken = sorted(i + r.rank for r in two for i in r.steps(7, 0))
    assert taken == [0, 1, 2, 3, 4, 5]  # every batch once, none twice
    assert list(two[0].steps(7, 3)) == [3, 5]  # resumed after 3 global batches (say, by one process)
    assert list(Ranks(0, 3).steps(7, 4)) == [4] and list(Ranks(0, 3).steps(7, 5)) == []
    assert list(Ranks().steps(7, 2)) == [2, 3, 4, 5, 6]  # one process: every batch, as before


def test_one_process_joins_no_group(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert world_size() == 1
    ranks, device = join("cpu")
    assert not ranks.active and ranks.is_main and str(device) == "cpu"
    assert ranks.agree(True) and not ranks.agree(False)


def test_precision_is_a_validated_recipe_setting():
    cfg = TrainConfig(precision="bf16")
    assert TrainConfig.from_dict(cfg.to_dict()) == cfg and TrainConfig().precision == "fp32"
    with pytest.raises(ConfigError, match="precision must be one of"):
        TrainConfig(precision="fp8")


def test_bf16_on_cpu_trains_in_fp32_and_says_so(tmp_path):
    pairs = [(f"a{i} b{i % 5}", f"x{i % 7}") for i in range(32)]
    recipe = overfit_recipe(tmp_path, pairs).override({"train.batch_size": "8", "train.precision": "bf16",
                                                       "train.device": "cpu"})
    events = list(train(recipe, tmp_path / "p.safetensors", None, max_steps=2))
    notes = [e.message for e in events if isinstance(e, TrainNote)]
    assert any("bf16 needs a CUDA GPU" in n for n in notes)
    started = next(e for e in events if isinstance(e, TrainStarted))
    assert started.processes == 1 and started.device == "cpu"


def test_a_lost_peer_is_one_line_and_other_errors_stay_what_they_are():
    import torch

    from attnviz.engine.training.distributed import peer_failure

    gloo = RuntimeError("[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by "
                        "peer [127.0.0.1]:16289. This is typically caused by a remote worker crashing. GLHF!")
    two = Ranks(rank=1, world=2)
    assert peer_failure(gloo, two) == ("training process 1 stopped because another process of the run ended or "
                                       "stopped answering (Connection closed by peer [127.0.0.1]:16289).")
    assert peer_failure(torch.distributed.DistBackendError("NCCL communicator was aborted"), two) is not None
    assert peer_failure(gloo, Ranks()) is None  # one process has no peers
    assert peer_failure(RuntimeError("mat1 and mat2 shapes cannot be multiplied"), two) is None  # a bug: raised
    assert peer_failure(ValueError("Connection closed"), two) is None

