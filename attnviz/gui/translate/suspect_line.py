"""The suspect-translation score of the sentence shown in the Translate tab: once a translation finishes, its
components (``engine.attribution.suspect``: sequence log-probability and per token, Attn-ign-SRC, Wass-to-Unif,
the ALTI+ source share where the model's kind has ALTI+) and a verdict, on one selectable line under the translated
text; the tooltip says what each component is, where it comes from and which direction is suspicious.

The components are computed in a worker (the ALTI+ part is one teacher-forced pass on the output), beside the
tab's other jobs on the model (see ``gui.worker``). The verdict is per sentence, so it cannot rank as
the Analysis tab does over a corpus: it counts the components past a rule-of-thumb line (``SIGNS``) and says which.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Hashable, Iterator

from PySide6.QtCore import QObject, Qt, Slot
from PySide6.QtWidgets import QLabel

from attnviz.engine.attribution.suspect import LABELS
from attnviz.engine.events import Translation
from attnviz.gui.translate.changes import Cleared, DocumentChange, Finished, PathShown
from attnviz.gui.translate.document import DecodeDocument
from attnviz.gui.widgets import named
from attnviz.gui.worker import JobFailure, Worker

SHOWN = ("seq_logprob", "mean_logprob", "attn_ign_src", "wass_to_unif", "alti_source_share")
# component -> (direction, line): a sign when direction * value > direction * line. Rules of thumb for one
# sentence, not calibrated: a geometric-mean token probability under 0.14, half the source words ignored, the
# source attention mass half-way from uniform to one token, under a third of the prediction from the source
SIGNS = {"mean_logprob": (-1, -2.0), "attn_ign_src": (1, 0.5), "wass_to_unif": (1, 0.5),
         "alti_source_share": (-1, 1 / 3)}
TIP = ("Suspect-translation score of this sentence (signs of a hallucination; the Analysis tab ranks a corpus):\n"
       "log-prob: sum of log p(chosen) over the output tokens, <eos> included (Seq-Logprob, Guerreiro et al. 2023); "
       "per token: the same divided by the length. Low is suspect (below -2.0 per token counts as a sign).\n"
       "Attn-ign-SRC: share of source words whose total incoming cross-attention (last layer, heads averaged) is "
       "below 0.2 (Berard et al. 2019; Guerreiro et al. 2023). High is suspect (above 0.5).\n"
       "Wass-to-Unif: Wasserstein distance (0/1 cost) of the source attention mass from uniform (Guerreiro et al. "
       "2023, optimal transport). High is suspect (above 0.5).\n"
       "ALTI+ source: the share of each output token's prediction that comes from the source, averaged (ALTI+, "
       "Ferrando et al. 2022; used for hallucinations by Dale et al. 2023). Low is suspect (below 1/3); "
       "absent where ALTI+ is not defined.\n"
       "The verdict counts the signs; its lines are rules of thumb for a single sentence, not calibrated.")


def verdict(found: dict[str, float]) -> str:
    """"no sign of a hallucination" or "suspect: " and the components past their line."""
    signs = [name for name, (way, line) in SIGNS.items()
             if math.isfinite(found.get(name, math.nan)) and way * found[name] > way * line]
    if not signs:
        return "no sign of a hallucination"
    return "suspect: " + ", ".join(LABELS[name] for name in signs)


def line(found: dict[str, float]) -> str:
    """The components and the verdict as one line of text (what is shown and copied)."""
    parts = [f"{LABELS[name]} {found[name]:.3f}" for name in SHOWN if math.isfinite(found.get(name, math.nan))]
    return f"Suspect score: {'; '.join(parts)} \u2014 {verdict(found)}"


class SuspectJob:
    """Worker job: the components of one finished translation, as one dict."""

    def __init__(self, translator, translation: Translation):
        self.translator, self.translation = translator, translation

    def __call__(self, stop: threading.Event) -> Iterator[dict[str, float]]:
        from attnviz.engine.attribution.suspect_corpus import translation_components

        yield translation_components(self.translator, self.translation)


class SuspectLine(QObject):
    """The line (``label``) and the work behind it; a language model's output gets none (no source)."""

    def __init__(self, document: DecodeDocument, parent: QObject | None = None):
        super().__init__(parent)
        self.document, self.translator = document, None
        self.found: dict[str, float] | None = None
        self._key: Hashable = None  # the translation the line (or its job) belongs to
        self.label = named(QLabel(), "suspectLine", "Suspect-translation score", TIP)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.label.setWordWrap(True)
        self.label.hide()
        self.worker = Worker(self)
        self.worker.produced.connect(self._on_worker_produced)
        self.worker.failed.connect(self._on_worker_failed)
        document.subscribe(self._on_document_changed)

    def set_translator(self, translator) -> None:
        self.translator = translator
        self._forget()

    def _forget(self) -> None:
        self.worker.cancel()
        self.found, self._key = None, None
        self.label.clear()
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
        self.label.show()
        self.worker.start(SuspectJob(translator, t))

    @Slot(object)
    def _on_worker_produced(self, found: dict[str, float]) -> None:
        self.found = found
        self.label.setText(line(found))

    @Slot(object)
    def _on_worker_failed(self, failure: JobFailure) -> None:
        self.label.setText(f"Suspect score failed: {failure.text.splitlines()[0]}")
