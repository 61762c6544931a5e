"""StepTableModel: the decoded steps as a table (step, token, probability, entropy, runner-up)."""

from __future__ import annotations

from PySide6.QtCore import QAbstractTableModel, QModelIndex, Qt

from attnviz.engine.events import DecodeStep

COLUMNS = ("Step", "Token", "Probability", "Entropy (nats)", "Runner-up")
# The invalid (root) index as a shared default: the same single instance the old
# ``parent=QModelIndex()`` defaults created once at definition time.
_ROOT = QModelIndex()


def describe_step(step: DecodeStep) -> str:
    """One decoded step in a sentence: what a tooltip shows and a screen reader reads for any of its cells."""
    text = (f"Step {step.index + 1}: {step.token!r}, probability {step.probability:.4f}, entropy {step.entropy:.3f} "
            "nats")
    if len(step.topk) > 1:
        text += f", runner-up {step.topk[1][0]!r} ({step.topk[1][1]:.3f})"
    if step.forced:
        text += ". Part of the typed prefix: the probability is what the model gave this character."
    return text


class StepTableModel(QAbstractTableModel):
    def __init__(self, parent=None):
        super().__init__(parent)
        self._steps: list[DecodeStep] = []

    def set_steps(self, steps: list[DecodeStep]) -> None:
        self.beginResetModel()
        self._steps = list(steps)
        self.endResetModel()

    def append(self, step: DecodeStep) -> None:
        row = len(self._steps)
        self.beginInsertRows(QModelIndex(), row, row)
        self._steps.append(step)
        self.endInsertRows()

    def rowCount(self, parent=_ROOT) -> int:  # noqa: N802
        return 0 if parent.isValid() else len(self._steps)

    def columnCount(self, parent=_ROOT) -> int:  # noqa: N802
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):  # noqa: N802
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal:
            return COLUMNS[section]
        return None

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        step = self._steps[index.row()]
        if role == Qt.ItemDataRole.DisplayRole:
            runner = f"{step.topk[1][0]} ({step.topk[1][1]:.3f})" if len(step.topk) > 1 else ""
            token = f"{step.token} (prefix)" if step.forced else step.token  # typed, not chosen by the model
            return (str(step.index + 1), token, f"{step.probability:.4f}", f"{step.entropy:.3f}",
                    runner)[index.column()]
        if role in (Qt.ItemDataRole.ToolTipRole, Qt.ItemDataRole.AccessibleTextRole):
            # the whole row in words: columns may be too narrow, and a screen reader needs the column names
            return describe_step(step)
        if role == Qt.ItemDataRole.TextAlignmentRole and index.column() in (0, 2, 3):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None
