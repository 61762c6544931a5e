"""The Heads off page: which heads are switched off, how, and the translation before and after, side by side.

Heads are switched in the head grid (``head_grid.HeadGrid``: Ctrl+click a tile, Ctrl+click a layer's label, or
Space / Shift+Space on the keyboard cursor); the sentence then re-decodes at once. An off head's attention weights
are zeroed, so it adds nothing and the other heads are left as they are (Michel et al., 2019); "Rescale remaining
heads" instead multiplies the layer's other heads by H / (H - off), as dropout does (a softmax row whose weights are
all zero cannot be renormalised, so the alternative acts across heads). "Before" is the same sentence decoded the
same way with every head on. Tokens that differ (``changed_tokens``: a difflib alignment of the two token lists)
are highlighted and bracketed, so a screen reader hears the marks too.
"""

from __future__ import annotations

import difflib
import html
from collections.abc import Sequence

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QTextEdit,
    QVBoxLayout,
    QWidget,
)

from attnviz.gui.widgets import named

MARK = "background-color:#ffd27f;color:#000;font-weight:bold"


def changed_tokens(before: Sequence[str], after: Sequence[str]) -> tuple[set[int], set[int]]:
    """Indices of the tokens of ``before`` and of ``after`` outside the longest matching blocks: what changed."""
    matcher = difflib.SequenceMatcher(a=list(before), b=list(after), autojunk=False)
    same_a: set[int] = set()
    same_b: set[int] = set()
    for a, b, size in matcher.get_matching_blocks():
        same_a.update(range(a, a + size))
        same_b.update(range(b, b + size))
    return set(range(len(before))) - same_a, set(range(len(after))) - same_b


def marked_html(tokens: Sequence[str], changed: set[int]) -> str:
    return " ".join(f"<span style='{MARK}'>[{html.escape(t)}]</span>" if i in changed else html.escape(t)
                    for i, t in enumerate(tokens))


class HeadsOffPanel(QWidget):
    reset = Signal()  # switch every head on again
    rescale_changed = Signal(bool)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("headsOffPanel")
        self.off_edit = named(QLineEdit(), "headsOffEdit", "Heads switched off",
                              "The heads switched off, as the command line writes them (--heads-off); select or copy")
        self.off_edit.setReadOnly(True)
        self.off_edit.setPlaceholderText("none: Ctrl+click a map in the head grid to switch it off")
        self.rescale_check = named(QCheckBox("Rescale remaining heads"), "rescaleHeadsCheck",
                                   "Rescale remaining heads",
                                   "Off: an off head's weights are zeroed and the others left as they are. On: the "
                                   "layer's remaining heads are multiplied by H / (H - off), as dropout does")
        self.reset_button = named(QPushButton("All &back on"), "allHeadsOnButton", "Switch all heads on",
                                  "Switch every head on again and re-decode")
        self.before_title, self.after_title = QLabel("<b>All heads on</b>"), QLabel("<b>With heads off</b>")
        self.before_text = self._text("beforeText", "Translation with every head on")
        self.after_text = self._text("afterText", "Translation with the heads switched off")
        self.summary = QLabel("Ctrl+click a map in the head grid to switch it off; changed tokens are [bracketed].")
        self.summary.setToolTip("Ctrl+click a map in the head grid below to switch that head off, Ctrl+click a "
                                "layer's label for the whole layer (keyboard: Space, Shift+Space); the sentence "
                                "re-decodes at once. Changed tokens are highlighted and [bracketed].")
        self.summary.setMinimumWidth(1)  # unwrapped: a wrapped label would make the scroll area scroll
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        grid = QGridLayout()  # two columns: it fits the Translate tab's side column
        off_row = QHBoxLayout()
        off_row.addWidget(QLabel("Off:"))
        off_row.addWidget(self.off_edit, 1)
        grid.addLayout(off_row, 0, 0, 1, 2)
        grid.addWidget(self.rescale_check, 1, 0)
        grid.addWidget(self.reset_button, 1, 1, Qt.AlignmentFlag.AlignRight)
        grid.addWidget(self.before_title, 2, 0)
        grid.addWidget(self.after_title, 2, 1)
        grid.addWidget(self.before_text, 3, 0)
        grid.addWidget(self.after_text, 3, 1)
        grid.setColumnStretch(0, 1)
        grid.setColumnStretch(1, 1)
        grid.setRowStretch(3, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addWidget(self.summary)
        layout.addLayout(grid, 1)
        self.reset_button.clicked.connect(self.reset)
        self.rescale_check.toggled.connect(self.rescale_changed)
        self.before_tokens: list[str] = []
        self.after_tokens: list[str] = []
        self.changed: tuple[set[int], set[int]] = (set(), set())

    def resizeEvent(self, event) -> None:  # noqa: N802
        self.summary.setVisible(self.height() > 170)  # a short window keeps the texts, not the help

    @staticmethod
    def _text(name: str, accessible: str) -> QTextEdit:
        edit = named(QTextEdit(), name, accessible)
        edit.setReadOnly(True)
        edit.setMinimumHeight(24)
        edit.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse |
                                     Qt.TextInteractionFlag.TextSelectableByKeyboard)
        return edit

    def set_off(self, text: str, count: int) -> None:
        self.off_edit.setText(text)
        self.after_title.setText(f"<b>With {count} head{'s' if count != 1 else ''} off</b>" if count else
                                 "<b>With heads off</b>")
        self.reset_button.setEnabled(bool(count))

    def show_pair(self, before: Sequence[str] | None, after: Sequence[str] | None) -> None:
        """The two translations' tokens (None: not decoded yet); the changed ones are marked in both."""
        self.before_tokens, self.after_tokens = list(before or []), list(after or [])
        self.changed = changed_tokens(self.before_tokens, self.after_tokens) if before and after else (set(), set())
        for edit, tokens, changed in ((self.before_text, before, self.changed[0]),
                                      (self.after_text, after, self.changed[1])):
            edit.setHtml(marked_html(tokens, changed) if tokens is not None else "<i>decoding...</i>")
        if before is not None and after is not None:
            n = len(self.changed[1])
            self.after_text.setAccessibleDescription(
                f"{n} changed token{'s' if n != 1 else ''}: " + ", ".join(after[i] for i in sorted(self.changed[1]))
                if n else "the same translation as with every head on")
