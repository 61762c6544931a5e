"""Exploring decoding in the Translate tab: the search tree, what-if branches and heads switched off.

``SearchExplorer`` reads and listens to the tab's ``DecodeDocument``, whose search tree every decode grows (a greedy
or sampled path, or a beam search's candidates as its ``BeamStep``s arrive). While a beam decodes, the document shows
the best live hypothesis step by step (redrawn at most every 40 ms); when it ends, the chosen one, which playback
then scrubs. Clicking a node (or an n-best row) shows that hypothesis in every view: its tokens, its top-k at the
last step, and every attention map. A what-if decodes on after another token at the shown step (greedily, or sampled
as the main decode was; a beam search in beam mode) and hangs the branch on the same tree; a typed target prefix
starts a branch at the root. Both run in their own worker, so the window never waits.

Switching heads off re-decodes the sentence at once (through the tab, which cancels a running decode) and compares it
with the same decode with every head on, computed in a third worker when not already known. The explorer asks the tab
only what ``ExplorerHost`` offers.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Protocol

from PySide6.QtCore import QObject, QTimer, Signal, Slot
from PySide6.QtWidgets import QTableView, QTabWidget, QWidget

from attnviz.engine.config import DecodeConfig
from attnviz.engine.errors import InputError
from attnviz.engine.heads import HeadRef, format_heads
from attnviz.engine.search.tree import ROOT, SearchEvent
from attnviz.engine.text.vocab import EOS
from attnviz.gui.translate.head_toggles import HeadsOffPanel
from attnviz.gui.translate.layout import PAGE_ROWS
from attnviz.gui.translate.search_panel import SearchPanel
from attnviz.gui.widgets import scrolled, table_height
from attnviz.gui.worker import JobFailure, Worker
from attnviz.session.translate.changes import (
    Cleared,
    DocumentChange,
    Encoded,
    Finished,
    PathShown,
    SearchRanked,
    StepAdded,
    TreeGrew,
)
from attnviz.session.translate.document import DecodeDocument, DecodeRequest
from attnviz.session.translate.jobs import DecodeJob, FinalTokensJob

if TYPE_CHECKING:
    from attnviz.engine.translator import Translator


class ExplorerHost(Protocol):
    """What the search explorer may ask of the tab that holds it."""

    def decoding(self) -> bool:
        """Whether the main decode is still running."""
        ...

    def waiting(self) -> str:
        """Why nothing may decode now (another model is loading), or ""."""
        ...

    def pause(self) -> None:
        """Stop playback: the user chose what to show."""
        ...

    def show_message(self, text: str) -> None:
        """The tab's warning line ("" clears it)."""
        ...

    def show_status(self, text: str) -> None: ...

    def redecode(self, text: str) -> None:
        """Decode ``text`` again with the settings of now (heads switched off or on)."""
        ...

    def show_heads_off(self, heads: tuple[HeadRef, ...], redraw: bool) -> None:
        """The attention views cross these heads out (redrawn now when ``redraw``)."""
        ...


FRAME = 1  # px of the pages' frame above and below
TABS = "QTabBar::tab { padding: 3px 7px; }"  # the four titles in a 300 px column, on a short bar


class SearchExplorer(QObject):
    foil = Signal(str)  # "why the chosen token and not the branch's?" at the step where a what-if branch leaves

    def __init__(self, document: DecodeDocument, host: ExplorerHost, steps_page: QWidget,
                 parent: QObject | None = None):
        super().__init__(parent)
        self.document, self.host = document, host
        self.translator: Translator | None = None
        self._following = True  # while a beam decodes, show its best live hypothesis (until a node is clicked)
        self.heads_off: set[HeadRef] = set()
        self._baseline: tuple[Hashable, list[str]] | None = None  # (decode key, tokens) with every head on
        self._after: tuple[Hashable, list[str]] | None = None
        self.panel, self.heads_panel = SearchPanel(), HeadsOffPanel()
        self.branch_worker, self.base_worker = Worker(self), Worker(self)
        self._redraw = QTimer(self)  # draws a running beam at most every 40 ms, so its events never queue up
        self._redraw.setSingleShot(True)
        self._redraw.setInterval(40)
        self._redraw.timeout.connect(self._on_redraw)
        self._grown = QTimer(self)  # greedy steps that arrive together lay the tree out once, after them
        self._grown.setSingleShot(True)
        self._grown.setInterval(0)
        self._grown.timeout.connect(self._on_grown)
        self.side = QTabWidget()
        self.side.setObjectName("searchTabs")
        self.side.setDocumentMode(True)  # no frame around the page: the side column is narrow
        self.side.tabBar().setStyleSheet(TABS)
        self._needs: dict[QWidget, Callable[[], int]] = {}
        self.add_page(steps_page, "Steps", lambda: table_height(steps_page, PAGE_ROWS)
                      if isinstance(steps_page, QTableView) else steps_page.minimumSizeHint().height())
        self.panel_scroll, self.heads_scroll = scrolled(self.panel), scrolled(self.heads_panel, "headsOffScroll")
        # scrolled: a short window squeezes, never clips them
        self.add_page(self.panel_scroll, "Search tree", lambda: self.panel.minimumSizeHint().height())
        self.add_page(self.heads_scroll, "Heads &off", lambda: self.heads_panel.minimumSizeHint().height())
        self.panel.node_chosen.connect(self.choose)
        self.panel.what_if.connect(self.what_if)
        self.panel.force_prefix.connect(self.force_prefix)
        self.panel.contrast.connect(self.contrast_branch)
        self.heads_panel.reset.connect(self.all_heads_on)
        self.heads_panel.rescale_changed.connect(self._on_rescale_changed)
        self.branch_worker.produced.connect(self._on_branch_produced)
        self.branch_worker.failed.connect(self._on_failed)
        self.branch_worker.finished.connect(self._on_branch_finished)
        self.base_worker.produced.connect(self._on_base_produced)
        self.base_worker.failed.connect(self._on_failed)
        self.heads_panel.set_off("", 0)
        document.subscribe(self._on_document_changed)

    # -- the main decode ---------------------------------------------------------------------------------------------

    def set_translator(self, translator: Translator | None) -> None:
        for worker in (self.branch_worker, self.base_worker):
            worker.cancel()
        self.translator, self._baseline, self._after = translator, None, None
        self.heads_off.clear()  # another model has other heads
        self._heads_changed(redecode=False)
        self.panel.tree_view.set_tree(None)
        self.panel.set_rows([], None)
        self.panel.set_vocabulary(sorted(translator.tgt_vocab.to_list()) if translator is not None else [])
        self.heads_panel.show_pair([], [])

    def config(self, decode: DecodeConfig) -> DecodeConfig:
        return decode.replace(heads_off=tuple(sorted(self.heads_off)),
                              rescale_heads=self.heads_panel.rescale_check.isChecked())

    def _on_document_changed(self, change: DocumentChange) -> None:
        tree_view = self.panel.tree_view
        match change:
            case Cleared():  # a new decode: the old one's branches and drawing stop
                self.branch_worker.cancel()
                self._following = True
                self._redraw.stop()
                self._grown.stop()
                tree_view.set_tree(None)
                self.panel.set_rows([], None)
            case Encoded():
                tree_view.set_tree(self.document.tree)
            case StepAdded():
                if not self._grown.isActive():  # laying out the whole tree per step made a long decode O(n^2)
                    self._grown.start()
            case TreeGrew(branch=0):
                if not self._redraw.isActive():  # steps that arrive together are drawn once
                    self._redraw.start()
            case TreeGrew():  # a what-if branch
                tree_view.refresh()
            case SearchRanked(chosen=chosen) if chosen is not None:
                self._redraw.stop()
                tree_view.refresh()
                shown = chosen if self._following else tree_view.selected
                if shown is not None:
                    self.document.show_node(shown)
                self._fill_rows()
                if self.side.currentWidget() is not self.heads_scroll:  # a heads-off re-decode keeps its comparison
                    self.side.setCurrentWidget(self.panel_scroll)
            case PathShown(node=node):
                tree_view.select(node)
                self.panel.select_row(node)
            case Finished():
                self._decoded()

    @Slot()
    def _on_redraw(self) -> None:
        """The beam so far: the tree, and (unless a node was chosen) the best live hypothesis in every view."""
        tree = self.document.tree
        if tree is None:
            return
        self.panel.tree_view.refresh()
        if self._following and tree.leader in tree.nodes:
            self.document.show_node(tree.leader, finished=False)

    @Slot()
    def _on_grown(self) -> None:
        self.panel.tree_view.refresh()

    def _decoded(self) -> None:
        """The main decode ended: list the greedy path and compare with every head on."""
        if self._grown.isActive():  # the last steps' layout, now: what follows reads it
            self._grown.stop()
            self.panel.tree_view.refresh()
        tree, request, translator = self.document.tree, self.document.request, self.translator
        if tree is None or request is None or translator is None:
            return
        if not request.beam:
            self.panel.tree_view.select(tree.tip if tree.tip != ROOT else None)
            self._fill_rows()
        after = [s.token for s in self.document.steps if s.token != EOS]
        key = self._key(request)
        self._after = (key, after)
        if not request.decode.heads_off:
            self._baseline = (key, after)
        if self._baseline is not None and self._baseline[0] == key:
            self.heads_panel.show_pair(self._baseline[1], after)
        else:
            self.heads_panel.show_pair(None, after)
            base = DecodeRequest(request.text, request.decode.replace(heads_off=(), rescale_heads=False),
                                 request.beam)
            self.base_worker.start(FinalTokensJob(translator, base, key))

    def _key(self, request: DecodeRequest) -> Hashable:
        return id(self.translator), request.text, request.beam, repr(request.decode.replace(heads_off=(),
                                                                                             rescale_heads=False))

    def add_page(self, page: QWidget, title: str, need: Callable[[], int]) -> None:
        """One more page beside the step table, ``need()`` the height it wants (its rows)."""
        self.side.addTab(page, title)
        self._needs[page] = need

    def page_need(self) -> int:
        """The height the open page wants: its ``PAGE_ROWS`` rows (tree rows, table rows) and the tab bar."""
        page = self.side.currentWidget()
        need = self._needs.get(page)
        return self.side.tabBar().sizeHint().height() + 2 * FRAME + (need() if need is not None else 0)

    # -- showing a hypothesis ----------------------------------------------------------------------------------------

    @Slot(int)
    def choose(self, node_id: int) -> None:
        """A node clicked (or an n-best row): show that hypothesis everywhere."""
        request, tree = self.document.request, self.document.tree
        if self.host.decoding() and not (request is not None and request.beam):
            self._say("Wait until the decode has finished, then choose a node.")
        elif tree is not None and node_id in tree.nodes:
            self._following = False
            self.host.pause()
            self.document.show_node(node_id)

    def _fill_rows(self) -> None:
        hypotheses = self.document.hypotheses()
        rows = [(h.label, h.node, h.text, h.node.normalised) for h in hypotheses]
        self.panel.set_rows(rows, self.panel.tree_view.selected)
        self.panel.foils = {h.node.id: left[1] for h in hypotheses if (left := self.leaves_at(h.node.id))}

    def leaves_at(self, node_id: int) -> tuple[int, str] | None:
        """Where the hypothesis ending at ``node_id`` leaves the search's answer: (the step, its token there);
        None on the answer's own path."""
        tree = self.document.tree
        if tree is None or tree.chosen is None or node_id not in tree.nodes:
            return None
        answer, path = tree.path_ids(tree.chosen), tree.path_ids(node_id)
        step = next((i for i, n in enumerate(path) if i >= len(answer) or answer[i] != n), None)
        return None if step is None else (step, tree.nodes[path[step]].step.token)

    @Slot(int)
    def contrast_branch(self, node_id: int) -> None:
        """Why the answer's token and not the branch's, at the step where the branch leaves: the answer shown at
        that step, then ``foil`` asked."""
        left, tree = self.leaves_at(node_id), self.document.tree
        if self.host.decoding():
            self._say("Wait until the decode has finished, then ask about a branch.")
        elif left is not None and tree is not None and tree.chosen is not None:
            self.choose(tree.chosen)
            self.document.go_to(left[0])
            self.foil.emit(left[1])

    # -- what-if -----------------------------------------------------------------------------------------------------

    @Slot(str)
    def what_if(self, token: str) -> None:
        doc, translator = self.document, self.translator
        if self.host.waiting():
            self._say(self.host.waiting())
        elif self.host.decoding():
            self._say("Wait until the decode has finished, then choose another token.")
        elif doc.tree is None or translator is None or not 0 <= doc.current < len(doc.shown):
            self._say("Translate first, then choose a step (slider or output token) and another token for it.")
        elif not token:
            self._say("Type a token from the output vocabulary (or double-click one in the top-k chart).")
        elif token not in translator.tgt_vocab:
            self._say(f"{token!r} is not in the model's output vocabulary; the completion lists the tokens it knows.")
        else:
            node = doc.tree.nodes[doc.shown[doc.current]]
            if node.step.token == token:
                self._say(f"{token!r} is already the token taken at step {doc.current + 1}: choose another one.")
                return
            ids = doc.tree.forced_ids(node.id, translator.tgt_vocab.encode([token])[0])
            self._start_branch(ids, node.parent, f"what if {token!r} at step {doc.current + 1}")

    @Slot(str)
    def force_prefix(self, text: str) -> None:
        if self.host.waiting():
            self._say(self.host.waiting())
            return
        if self.document.tree is None or self.translator is None or self.host.decoding():
            self._say("Translate first (and let it finish): a forced prefix decodes the same sentence after the "
                      "words typed.")
            return
        try:
            ids = self.translator.target_ids(text)
        except InputError as exc:
            self._say(str(exc))
            return
        if not ids:
            self._say("Type the target words the translation must start with.")
            return
        self._start_branch(ids, ROOT, f"after the prefix {text.strip()!r}")

    def _start_branch(self, forced: list[int], parent: int, what: str) -> None:
        """Decode on after ``forced`` as the main decode did: a beam search grafted under ``parent`` in beam mode,
        else a greedy (or sampled) path."""
        request, translator = self.document.request, self.translator
        if request is None or translator is None:
            return
        branch = self.document.begin_branch(parent)
        self.host.show_message("")
        self.host.show_status(f"Decoding what-if branch {branch}: {what}...")
        self.branch_worker.start(DecodeJob(translator, request, tuple(forced)))

    @Slot(object)
    def _on_branch_produced(self, event: SearchEvent) -> None:
        self.document.add_branch(event)

    @Slot()
    def _on_branch_finished(self) -> None:
        ended = self.document.end_branch()
        if ended is None:
            return
        branch, tip = ended
        self._following = False
        self.document.show_node(tip)
        self._fill_rows()
        self.side.setCurrentWidget(self.panel_scroll)
        self.host.show_status(f"What-if branch {branch}: {self.document.text()}")

    @Slot(object)
    def _on_failed(self, failure: JobFailure) -> None:
        self._say(failure.text)

    def _say(self, text: str) -> None:
        self.host.show_message(text)
        self.host.show_status(text)

    # -- heads off ---------------------------------------------------------------------------------------------------

    @Slot(str, int, int)
    def toggle_head(self, kind: str, layer: int, head: int) -> None:
        layers_heads = self.document.head_layout().get(kind, (0, 0))
        heads = range(layers_heads[1]) if head < 0 else [head]
        kind = self.document.shared(kind)[0]  # one name for a head every view shares (an LLM's one attention)
        refs = {HeadRef(kind, layer, h) for h in heads}
        if refs <= self.heads_off:
            self.heads_off -= refs
        else:
            self.heads_off |= refs
        self._heads_changed()

    @Slot()
    def all_heads_on(self) -> None:
        self.heads_off.clear()
        self._heads_changed()

    @Slot(bool)
    def _on_rescale_changed(self, on: bool) -> None:
        if self.heads_off:
            self._heads_changed()

    def _heads_changed(self, redecode: bool = True) -> None:
        heads = tuple(sorted(self.heads_off))
        layout = self.document.head_layout() if self.document.steps else None
        self.heads_panel.set_off(format_heads(self.heads_off, layout), len(self.heads_off))
        request = self.document.request
        can_redecode = redecode and self.document.tree is not None and self.translator is not None
        self.host.show_heads_off(heads, redraw=redecode and not can_redecode)
        if not redecode:
            return
        self.side.setCurrentWidget(self.heads_scroll)
        if can_redecode and request is not None:
            self.host.redecode(request.text)  # cancels a running decode

    @Slot(object)
    def _on_base_produced(self, result: tuple[Hashable, list[str]]) -> None:
        key, tokens = result
        self._baseline = (key, [t for t in tokens if t != EOS])
        if self._after is not None and self._after[0] == key:
            self.heads_panel.show_pair(self._baseline[1], self._after[1])
