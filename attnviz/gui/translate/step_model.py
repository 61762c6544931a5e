"""StepTableModel: the steps of the hypothesis a ``DecodeDocument`` shows, as a table (step, token, probability,
entropy, runner-up; and, while an attribution is shown, the source share of each output token). It keeps no steps
of its own: it reads the document, and follows its changes (a step added inserts a row; a new decode or another
hypothesis resets the table)."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QObject, Qt

from attnviz.engine.events import DecodeStep
from attnviz.engine.text.tokenize import piece_label
from attnviz.gui.widgets import NO_PARENT, ModelIndex
from attnviz.session.translate.changes import Cleared, DocumentChange, Encoded, PathShown, StepAdded
from attnviz.session.translate.document import DecodeDocument

COLUMNS = ("Step", "Token", "Probability", "Entropy (nats)", "Runner-up")
AT_LIMIT = " (cut)"  # after the last token of a translation stopped at the length limit (its tooltip says which)
FORCED_RUNNER = "none: forced"
SHARE = "Source share"
# an LLM prompt's three shares (``Attribution.shares``) in the Source share column: short, since the side column is
# narrow and the column sizes itself to it (its tooltip spells the three out)
PARTS = "% s·i·p"


def describe_step(step: DecodeStep) -> str:
    """One decoded step in a sentence: what a tooltip shows and a screen reader reads for any of its cells."""
    text = (f"Step {step.index + 1}: {step.token!r}, probability {step.probability:.4f}, entropy {step.entropy:.3f} "
            "nats")
    if len(step.topk) > 1:
        text += f", runner-up {step.topk[1][0]!r} ({step.topk[1][1]:.3f})"
    if step.forced:
        text += (". Forced, not chosen (a typed prefix, or the model's own rule: its target language or its end "
                 "token): the probability and the runner-up are what the model itself gave")
    return text


class StepTableModel(QAbstractTableModel):
    def __init__(self, document: DecodeDocument, parent: QObject | None = None):
        super().__init__(parent)
        self._document = document
        self._rows = 0  # the rows views were told of: the document's list grows before this model hears of it
        self._shares: list[float] | None = None  # per step, the source share of the attribution shown
        self._share_name = ""
        self._parts: list[tuple[float, float, float]] | None = None  # an LLM's: span, instruction, prefix shares
        self._limit: int | None = None  # the length limit the hypothesis shown stopped at, if it did
        self._setting = "Max length"  # what raises it (``mark_limit``)
        document.subscribe(self._on_document_changed)

    def _on_document_changed(self, change: DocumentChange) -> None:
        match change:
            case StepAdded(index=row) if row == self._rows:
                self.beginInsertRows(QModelIndex(), row, row)
                self._rows = row + 1
                self.endInsertRows()
            case StepAdded() | Cleared() | Encoded() | PathShown():
                self._limit = None  # said again (mark_limit) once the hypothesis shown is known to be finished
                self.beginResetModel()
                self._rows = len(self._document.steps)
                self.endResetModel()

    def set_shares(self, shares: list[float] | None, name: str = "",
                   parts: list[tuple[float, float, float]] | None = None) -> bool:
        """Show (or, None, hide) the Source share column: per step, the share of its attribution from the source
        (``parts``, an LLM prompt's: the source span's, the instruction and template's and the prefix's). Whether
        anything changed (the table was reset)."""
        if shares == self._shares and name == self._share_name and parts == self._parts:
            return False
        self.beginResetModel()
        self._shares, self._share_name, self._parts = shares, name, parts
        self.endResetModel()
        return True

    def _share_text(self, row: int) -> str:
        if self._parts is not None and row < len(self._parts):
            return "·".join(f"{100 * v:.0f}" for v in self._parts[row])  # narrow: "5·80·15" (%)
        share = self._shares[row] if self._shares is not None and row < len(self._shares) else None
        return "" if share is None else f"{share:.0%}"

    def mark_limit(self, limit: int | None, setting: str = "Max length") -> None:
        """Mark the last row as where the translation stopped at the length ``limit`` (None: it chose its end);
        ``setting`` says what raises it."""
        self._setting = setting
        if limit != self._limit:
            self._limit = limit
            if self._rows:
                last = self._rows - 1
                self.dataChanged.emit(self.index(last, 0), self.index(last, self.columnCount() - 1))

    def _at_limit(self, row: int) -> bool:
        return self._limit is not None and row == self._rows - 1

    def columns(self) -> tuple[str, ...]:
        return COLUMNS + ((SHARE,) if self._shares is not None else ())

    def rowCount(self, parent: ModelIndex = NO_PARENT) -> int:  # noqa: N802
        return 0 if parent.isValid() else self._rows

    def columnCount(self, parent: ModelIndex = NO_PARENT) -> int:  # noqa: N802
        return 0 if parent.isValid() else len(self.columns())

    def headerData(self, section: int, orientation: Qt.Orientation,  # noqa: N802
                   role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if orientation != Qt.Orientation.Horizontal or section >= len(self.columns()):
            return None
        if role == Qt.ItemDataRole.ToolTipRole and self.columns()[section] == SHARE:
            if self._parts is not None:
                return f"{PARTS} ({self._share_name}): how much of the output token's |attribution| comes from the " \
                       "sentence's own tokens (s: the source span), from the instruction and chat template (i), and " \
                       "from the output prefix (p), in percent; the three sum to 100"
            return f"{SHARE} ({self._share_name}): how much of the output token's attribution comes from the source; " \
                   "the rest comes from the target prefix"
        if role == Qt.ItemDataRole.DisplayRole and self.columns()[section] == SHARE and self._parts is not None:
            return PARTS
        if role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.ToolTipRole):
            return self.columns()[section]  # the tooltip: the whole title, when a narrow column elides it
        return None

    def data(self, index: ModelIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        step = self._document.steps[index.row()]
        if role == Qt.ItemDataRole.DisplayRole:
            runner = f"{piece_label(step.topk[1][0])} ({step.topk[1][1]:.3f})" if len(step.topk) > 1 else ""
            runner = FORCED_RUNNER if step.forced else runner  # nothing was chosen, so nothing ran up
            token = piece_label(step.token) + (" (forced)" if step.forced else "")  # given, not chosen by the model
            token += AT_LIMIT if self._at_limit(index.row()) else ""
            return (str(step.index + 1), token, f"{step.probability:.4f}", f"{step.entropy:.3f}",
                    runner, self._share_text(index.row()))[index.column()]
        if role in (Qt.ItemDataRole.ToolTipRole, Qt.ItemDataRole.AccessibleTextRole):
            # the whole row in words: columns may be too narrow, and a screen reader needs the column names
            cut = (f". The translation stopped here, at the length limit of {self._limit} tokens, not by choosing "
                   f"its end: raise {self._setting} to let it finish") if self._at_limit(index.row()) else ""
            return describe_step(step) + cut
        if role == Qt.ItemDataRole.TextAlignmentRole and index.column() in (0, 2, 3, 5):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None
