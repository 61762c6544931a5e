"""The tables of the notebook API: a word alignment (``WordAlignment``) and every head's statistics
(``HeadStatistics``), each turning into numpy or pandas and showing itself in Jupyter.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from attnviz.api.display import heatmap_png, png_html, require_pandas, table_html
from attnviz.engine.analysis.names import STATS

if TYPE_CHECKING:  # the type only: the statistics module imports torch
    from attnviz.engine.analysis.stats import HeadStats


@dataclass(frozen=True)
class WordAlignment:
    """Word alignment of one sentence pair read from cross-attention: ``links`` are (source word, target word)
    pairs, both from 0, as ``attnviz align`` prints them (Pharaoh ``i-j``). ``method`` says which heads were read
    ("layer 3 head 5", from 1 as the app numbers them, or "average of all layers and heads")."""

    source_words: tuple[str, ...]
    target_words: tuple[str, ...]
    links: tuple[tuple[int, int], ...]
    method: str
    settings: dict[str, Any] = field(default_factory=dict, repr=False)

    def pharaoh(self) -> str:
        """The links as one Pharaoh line, ``i-j`` (source-target, from 0)."""
        return " ".join(f"{i}-{j}" for i, j in self.links)

    def to_numpy(self) -> np.ndarray:
        """A bool matrix [target words, source words]: True where the two words are linked."""
        out = np.zeros((len(self.target_words), len(self.source_words)), dtype=bool)
        for i, j in self.links:
            out[j, i] = True
        return out

    def to_pandas(self) -> Any:
        """One row per link: source and target position (from 0) and word."""
        pandas = require_pandas()
        return pandas.DataFrame([(i, self.source_words[i], j, self.target_words[j]) for i, j in self.links],
                                columns=["source", "source_word", "target", "target_word"])

    def _caption(self) -> str:
        return f"Word alignment from cross-attention ({self.method})"

    def _repr_png_(self) -> bytes:
        return heatmap_png(self.to_numpy().astype(float), self.target_words, self.source_words, "target words",
                           "source words", self._caption(), value="linked")

    def _repr_html_(self) -> str:
        return png_html(self._repr_png_(), f"{self._caption()}: {self.pharaoh()}")


@dataclass(frozen=True)
class HeadStatistics:
    """What every layer x head of every attention kind does on average over a corpus (``attnviz heads``): row
    entropy, maximum weight, the share on sinks (``<sos>``, ``<eos>``, punctuation), on the same, previous and next
    position, the distance from the diagonal, and descriptive tags. Layers and heads count from 0 here (the app and
    the command line print them from 1). ``stats`` is the engine's ``HeadStats`` (per-sentence figures, typical
    sentences)."""

    stats: HeadStats

    @property
    def kinds(self) -> tuple[str, ...]:
        return self.stats.kinds

    def rows(self) -> list[dict[str, Any]]:
        """One dict per head: kind, layer, head, every statistic (None where it does not apply) and its tags."""
        return self.stats.table()

    def to_numpy(self, kind: str = "cross", stat: str = "entropy") -> np.ndarray:
        """One statistic's corpus means over ``kind``'s heads, [layers, heads] (NaN where it does not apply)."""
        if kind not in self.stats.kinds:
            raise ValueError(f"no {kind!r} attention here; the kinds are {', '.join(self.stats.kinds)}")
        means = self.stats.means(kind)
        if stat not in means:
            raise ValueError(f"unknown statistic {stat!r}; choose one of {', '.join(means)}")
        return np.array(means[stat], copy=True)

    def to_pandas(self) -> Any:
        """Every head as a row (kind, layer, head, the statistics, tags joined by commas)."""
        pandas = require_pandas()
        rows = [row | {"tags": ", ".join(row["tags"])} for row in self.rows()]
        return pandas.DataFrame(rows)

    def _caption(self) -> str:
        return f"Head statistics over {len(self.stats.sentences)} sentence(s), {self.stats.targets} targets"

    def _repr_html_(self) -> str:
        names = [s for s in STATS if s not in ("sos", "eos", "punct")]
        rows = [[row["kind"], row["layer"], row["head"], *(row.get(s) for s in names), ", ".join(row["tags"])]
                for row in self.rows()]
        return table_html(["kind", "layer", "head", *names, "tags"], rows, self._caption())
