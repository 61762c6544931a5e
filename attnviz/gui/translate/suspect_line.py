"""The suspect-translation score of the sentence shown in the Translate tab: once a translation finishes, its
components (``engine.attribution.suspect.components``: sequence log-probability and per token, Attn-ign-SRC, sink mass,
Wass-to-Unif, the ALTI+ source share where the model's kind has ALTI+) and a verdict, on one selectable line under the
translated text; the tooltip says what each component is, where it comes from, which direction is suspicious and
the AUROC it reached on this model's held-out data.

The verdict is ``suspect.rule.judge``'s: the model's calibration when it has one (``suspect.store``), else log-prob
per token alone, said so; an output mostly ``<unk>`` or repeating itself is flagged with that reason. The components
are computed in a worker (the ALTI+ part is one teacher-forced pass on the output), beside the tab's other jobs on
the model (see ``gui.worker``).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Hashable, Iterator

from PySide6.QtCore import QObject, QRect, Qt, Slot
from PySide6.QtWidgets import QLabel

from attnviz.engine.attribution.suspect.components import LABELS, SPAN_NOTE
from attnviz.engine.attribution.suspect.rule import Calibration, describe, judge
from attnviz.engine.attribution.suspect.store import calibration_of
from attnviz.engine.events import Translation
from attnviz.gui.widgets import named
from attnviz.gui.worker import JobFailure, Worker
from attnviz.session.translate.changes import Cleared, DocumentChange, Finished, PathShown
from attnviz.session.translate.document import DecodeDocument

SHOWN = ("seq_logprob", "mean_logprob", "attn_ign_src", "sink_mass", "wass_to_unif", "alti_source_share")
WHAT = ("Suspect-translation score of this sentence (signs of a hallucination; the Analysis tab ranks a corpus):\n"
        "log-prob: sum of log p(chosen) over the output tokens, <eos> included (Seq-Logprob, Guerreiro et al. 2023); "
        "per token: the same divided by the length. Low is suspect.\n"
        "Attn-ign-SRC: share of source words whose total incoming cross-attention (last layer, heads averaged) is "
        "below 0.2 (Berard et al. 2019; Guerreiro et al. 2023). High is suspect.\n"
        "Sink mass: cross-attention on <sos>, <eos>, punctuation and language tags. Shown, never voted.\n"
        "Wass-to-Unif: Wasserstein distance (0/1 cost) of the source attention mass from uniform (Guerreiro et al. "
        "2023, optimal transport). High is suspect.\n"
        "ALTI+ source: the share of each output token's prediction that comes from the source, averaged (ALTI+, "
        "Ferrando et al. 2022; used for hallucinations by Dale et al. 2023). Low is suspect; absent where ALTI+ is "
        "not defined.\n" + SPAN_NOTE + ".\n")


def tip(calibration: Calibration | None, where: str = "") -> str:
    """The tooltip: what each component is, then what the verdict rests on for this model (its AUROCs)."""
    return WHAT + "\n".join(describe(calibration, where))


def line(found: dict[str, float], calibration: Calibration | None = None) -> str:
    """The verdict, then the components, as one text (what is shown and copied): the verdict leads, so that a
    narrow column shows it on the first line."""
    parts = [f"{LABELS[name]} {found[name]:.3f}" for name in SHOWN if math.isfinite(found.get(name, math.nan))]
    return f"Suspect score: {judge(found, calibration).text()} \u2014 {'; '.join(parts)}"


class SuspectJob:
    """Worker job: the components of one finished translation, as one dict."""

    def __init__(self, translator, translation: Translation):
        self.translator, self.translation = translator, translation

    def __call__(self, stop: threading.Event) -> Iterator[dict[str, float]]:
        from attnviz.engine.attribution.suspect.corpus import translation_components

        yield translation_components(self.translator, self.translation)


def short_line(found: dict[str, float], calibration: Calibration | None = None) -> str:
    """The verdict alone (a short column's form; the components are then in the tooltip)."""
    return f"Suspect score: {judge(found, calibration).text()} \u2014 \u2026"


class SuspectLine(QObject):
    """The line (``label``) and the work behind it; a language model's output gets none (no source). In a short
    column (``set_compact``) it shows the verdict alone and its tooltip the whole line."""

    def __init__(self, document: DecodeDocument, parent: QObject | None = None):
        super().__init__(parent)
        self.document, self.translator = document, None
        self.found: dict[str, float] | None = None
        self.calibration: Calibration | None = None
        self.compact = False  # the verdict alone, the components in the tooltip
        self._tip = tip(None)
        self._key: Hashable = None  # the translation the line (or its job) belongs to
        self.label = named(QLabel(), "suspectLine", "Suspect-translation score", tip(None))
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.label.setWordWrap(True)
        self.label.hide()
        self.worker = Worker(self)
        self.worker.produced.connect(self._on_worker_produced)
        self.worker.failed.connect(self._on_worker_failed)
        document.subscribe(self._on_document_changed)

    def set_translator(self, translator) -> None:
        self.translator = translator
        self.calibration, where = calibration_of(translator) if translator is not None else (None, "")
        self._tip = tip(self.calibration, where)
        self.label.setToolTip(self._tip)
        self._forget()

    def text(self) -> str:
        """The whole line (components and verdict) of the translation shown, or ""."""
        return line(self.found, self.calibration) if self.found is not None else ""

    def set_compact(self, compact: bool) -> None:
        """The verdict alone (True) or the whole line (False)."""
        if compact != self.compact:
            self.compact = compact
            self._show()

    def extra_height(self, width: int) -> int:
        """The px the components add to the verdict in a column ``width`` px wide (0 before there are any)."""
        if self.found is None:
            return 0
        metrics, box = self.label.fontMetrics(), QRect(0, 0, max(width, 1), 100_000)
        heights = [metrics.boundingRect(box, Qt.TextFlag.TextWordWrap, text).height()
                   for text in (self.text(), short_line(self.found, self.calibration))]
        return max(heights[0] - heights[1], 0)

    def _show(self) -> None:
        if self.found is None:
            return
        short = self.compact and self.extra_height(self.label.width()) > 0
        self.label.setMinimumHeight(0)  # the figures are here: the reserve made for them is no longer needed
        self.label.setText(short_line(self.found, self.calibration) if short else self.text())
        self.label.setToolTip(self.text() + "\n\n" + self._tip if short else self._tip)

    def _forget(self) -> None:
        self.worker.cancel()
        self.found, self._key = None, None
        self.label.clear()
        self.label.setMinimumHeight(0)
        self.label.setToolTip(self._tip)
        self.label.hide()

    def _on_document_changed(self, change: DocumentChange) -> None:
        match change:
            case Cleared():
                self._forget()
            case Finished() | PathShown() if self.document.finished:
                self._start()

    def _start(self) -> None:
        doc, translator = self.document, self.translator
        if translator is None or not translator.has_source or not doc.steps:
            return
        t = doc.translation(-1)
        key = (id(translator), t.src_tokens, t.tokens)
        if key == self._key:
            return
        self.found, self._key = None, key
        self.label.setText("Suspect score: computing...")
        self.label.show()  # laid out in its column first: a hidden label's width is not the column's
        parent = self.label.parentWidget()
        width = parent.contentsRect().width() if parent is not None else self.label.width()
        self.label.setMinimumHeight(self.reserved_height(width))
        self.worker.start(SuspectJob(translator, t))

    def reserved_height(self, width: int) -> int:
        """The px a whole line with wide figures takes in a column ``width`` px wide: the label keeps it from
        "computing..." on, so that the tabs under it do not jump down when the figures arrive."""
        sample = {name: -123.456 for name in SHOWN}
        text = short_line(sample, self.calibration) if self.compact else line(sample, self.calibration)
        shown = self.label.text()
        self.label.setText(text)  # measured as the label lays it out (its margins and wrapping), then put back
        height = self.label.heightForWidth(max(width, 1))
        self.label.setText(shown)
        return max(height, 0)

    @Slot(object)
    def _on_worker_produced(self, found: dict[str, float]) -> None:
        self.found = found
        self._show()

    @Slot(object)
    def _on_worker_failed(self, failure: JobFailure) -> None:
        self.label.setText(f"Suspect score failed: {failure.text.splitlines()[0]}")
