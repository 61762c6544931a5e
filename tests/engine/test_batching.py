from hypothesis import given, settings
from hypothesis import strategies as st

from attnviz.engine.config import TrainConfig
from attnviz.engine.corpus.batching import batch_tensors, make_batches

lengths_strategy = st.lists(st.tuples(st.integers(3, 60), st.integers(3, 60)), min_size=1, max_size=300)


@settings(max_examples=60, deadline=None)
@given(lengths=lengths_strategy, budget=st.integers(130, 4000), seed=st.integers(0, 10))
def test_token_budget_batches_cover_everything_once_and_respect_the_budget(lengths, budget, seed):
    batches = make_batches(lengths, TrainConfig(max_tokens=budget), seed)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for b in batches:
        padded = len(b) * max(max(lengths[i]) for i in b) * 2
        assert padded <= budget or len(b) == 1


@settings(max_examples=40, deadline=None)
@given(lengths=lengths_strategy, size=st.integers(1, 64))
def test_sentence_batches_have_the_asked_size_and_are_reproducible(lengths, size):
    cfg = TrainConfig(batch_size=size)
    batches = make_batches(lengths, cfg, seed=3)
    assert all(len(b) <= size for b in batches) and sum(len(b) for b in batches) == len(lengths)
    assert sum(len(b) == size for b in batches) >= len(batches) - 1
    assert make_batches(lengths, cfg, seed=3) == batches


def test_bucketing_groups_similar_lengths():
    lengths = [(n, n) for n in range(1, 201)] * 2
    bucketed = make_batches(lengths, TrainConfig(batch_size=20), seed=0)
    spread = max(max(lengths[i][0] for i in b) - min(lengths[i][0] for i in b) for b in bucketed)
    random = make_batches(lengths, TrainConfig(batch_size=20, bucket=False), seed=0)
    random_spread = max(max(lengths[i][0] for i in b) - min(lengths[i][0] for i in b) for b in random)
    assert spread <= 10 < random_spread


def test_batch_tensors_pad_with_the_pad_id():
    src, tgt = batch_tensors([([2, 5, 3], [2, 6, 7, 3]), ([2, 3], [2, 3])])
    assert src.tolist() == [[2, 5, 3], [2, 3, 1]] and tgt.tolist() == [[2, 6, 7, 3], [2, 3, 1, 1]]
