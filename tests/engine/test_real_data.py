"""Checks on the real corpora (found through ATTNVIZ_DATA): reference A's tokenization and vocabulary sizes."""

import gzip

import pytest

from attnviz.engine.text.tokenize import TokenizerSpec
from attnviz.engine.text.vocab import Vocab

pytestmark = pytest.mark.data


def read_lines(path):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


@pytest.mark.parametrize("lang,expected", [("de", 7853), ("en", 5893)])
def test_reference_a_vocabulary_sizes_within_one_percent(data_dir, lang, expected):
    spec = TokenizerSpec(lang)
    vocab = Vocab.build((spec.tokenize(line) for line in read_lines(data_dir / f"multi30k_train.{lang}.gz")),
                        min_freq=2)
    assert abs(len(vocab) - expected) / expected < 0.01, len(vocab)


def test_the_train_line_with_a_tab_tokenizes_cleanly(data_dir):
    line = read_lines(data_dir / "multi30k_train.de.gz")[7365]
    assert "\t" in line
    tokens = TokenizerSpec("de").tokenize(line)
    assert "wasserfontäne" in tokens and all(t.strip() == t and t for t in tokens)
