"""Exploring decoding in the Translate tab: the search tree, what-if branches and heads switched off.

``SearchExplorer`` sits beside the tab's ``DecodeSession``: every decode also grows a ``SearchTree`` (a greedy or
sampled path, or a beam search's candidates as its ``BeamStep``s arrive). While a beam decodes, the tab shows the
best live hypothesis step by step; when it ends, the chosen one, which playback then scrubs. Clicking a node (or an
n-best row) shows that hypothesis in every view: its tokens, its top-k at the last step, and every attention map
(``SearchTree.translation``). A what-if decodes on after another token at the shown step (greedily, or sampled as the
main decode was) and hangs the branch on the same tree; a typed target prefix starts a branch at the root. Both run
in their own worker, so the window never waits.

Switching heads off re-decodes the sentence at once (the tab's worker cancels a running decode) and compares it with
the same decode with every head on, computed in a third worker when not already known.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, QTimer, Slot
from PySide6.QtWidgets import QTabWidget

from attnviz.engine.config import DecodeConfig
from attnviz.engine.errors import InputError
from attnviz.engine.events import BeamDone, BeamStep, DecodeStep, EncoderPass
from attnviz.engine.heads import HeadRef, format_heads
from attnviz.engine.search.tree import ROOT, SearchTree
from attnviz.engine.text.vocab import EOS
from attnviz.gui.translate.head_toggles import HeadsOffPanel
from attnviz.gui.translate.search_panel import SearchPanel
from attnviz.gui.translate.session import DecodeSession, word_merger
from attnviz.gui.widgets import scrolled
from attnviz.gui.worker import Worker


def final_tokens(translator, text: str, decode: DecodeConfig, beam: bool):
    """A whole decode's output tokens, as one event (the before side of a heads-off comparison)."""
    if beam:
        tree = None
        for event in translator.beam_steps(text, decode):
            if isinstance(event, EncoderPass):
                tree = SearchTree(event)
            else:
                tree.add(event)
        yield [s.token for s in tree.path(tree.chosen)] if tree.chosen is not None else []
    else:
        yield [e.token for e in translator.steps(text, decode) if isinstance(e, DecodeStep)]


class SearchExplorer(QObject):
    def __init__(self, tab):
        super().__init__(tab)
        self.tab = tab
        self.tree: SearchTree | None = None
        self.text, self.decode, self.beam = "", DecodeConfig(), False
        self.shown: list[int] = []  # node ids of the hypothesis the tab shows, in order
        self._tip = ROOT  # the end of the path (main or what-if) being added
        self._branch, self._graft = 0, None  # the what-if branch decoding now (a graft when it is a beam search)
        self._branch_ends: dict[int, int] = {}  # branch -> its end (a beam branch's best finished node)
        self._following = True  # while a beam decodes, show its best live hypothesis (until a node is clicked)
        self.heads_off: set[HeadRef] = set()
        self._baseline: tuple[tuple, list[str]] | None = None  # (decode key, tokens) with every head on
        self._after: tuple[tuple, list[str]] | None = None
        self.panel, self.heads_panel = SearchPanel(), HeadsOffPanel()
        self.branch_worker, self.base_worker = Worker(self), Worker(self)
        self._best = ROOT  # the best live hypothesis of the beam so far
        self._redraw = QTimer(self)  # draws a running beam at most every 40 ms, so its events never queue up
        self._redraw.setSingleShot(True)
        self._redraw.setInterval(40)
        self._redraw.timeout.connect(self._on_redraw)
        self.side = QTabWidget()
        self.side.setObjectName("searchTabs")
        self.side.addTab(tab.step_table, "Steps")
        self.panel_scroll, self.heads_scroll = scrolled(self.panel), scrolled(self.heads_panel, "headsOffScroll")
        self.side.addTab(self.panel_scroll, "Search tree")  # scrolled: a short window squeezes, never clips them
        self.side.addTab(self.heads_scroll, "Heads &off")
        self.panel.node_chosen.connect(self.choose)
        self.panel.what_if.connect(self.what_if)
        self.panel.force_prefix.connect(self.force_prefix)
        tab.topk_view.alternative.connect(self.what_if)
        tab.attention.head_toggled.connect(self.toggle_head)
        self.heads_panel.reset.connect(self.all_heads_on)
        self.heads_panel.rescale_changed.connect(self._on_rescale_changed)
        self.branch_worker.event.connect(self._on_branch_event)
        self.branch_worker.failed.connect(self._on_failed)
        self.branch_worker.finished.connect(self._on_branch_finished)
        self.base_worker.event.connect(self._on_base_event)
        self.base_worker.failed.connect(self._on_failed)
        self.heads_panel.set_off("", 0)

    # -- the main decode ---------------------------------------------------------------------------------------------

    def set_translator(self, translator) -> None:
        for worker in (self.branch_worker, self.base_worker):
            worker.cancel()
        self.tree, self.shown, self._baseline, self._after = None, [], None, None
        self.heads_off.clear()  # another model has other heads
        self._heads_changed(redecode=False)
        self.panel.tree_view.set_tree(None)
        self.panel.set_rows([], None)
        self.panel.set_vocabulary(sorted(translator.tgt_vocab.to_list()) if translator is not None else [])
        self.heads_panel.show_pair([], [])

    def config(self, decode: DecodeConfig) -> DecodeConfig:
        return decode.replace(heads_off=tuple(sorted(self.heads_off)),
                              rescale_heads=self.heads_panel.rescale_check.isChecked())

    def job(self, translator, text: str, decode: DecodeConfig, beam: bool):
        """The main decode's event factory for the tab's worker; resets the tree."""
        self.branch_worker.cancel()
        self.text, self.decode, self.beam = text, decode, beam
        self.tree, self.shown, self._tip, self._following, self._best = None, [], ROOT, True, ROOT
        self._branch_ends = {}
        self._redraw.stop()
        self.panel.tree_view.set_tree(None)
        self.panel.set_rows([], None)
        if beam:
            return lambda stop: translator.beam_steps(text, decode)
        return lambda stop: translator.steps(text, decode)

    def add(self, event) -> bool:
        """Take one main-decode event into the tree; True when it was a beam event, which only this handles."""
        if isinstance(event, EncoderPass):
            self.tree = SearchTree(event)
            self.panel.tree_view.set_tree(self.tree)
            return False
        if self.tree is None:
            return True
        if isinstance(event, DecodeStep):
            ids = self.tree.add_chain([event], self._tip)
            if ids:
                self._tip = ids[-1]
                self.tree.ranking = (self._tip,)
                self.shown.append(self._tip)
                self.panel.tree_view.refresh()
            return False
        self.tree.add(event)
        if isinstance(event, BeamStep):
            self._best = max(event.alive, key=lambda n: n.score).id if event.alive else self._best
            if not self._redraw.isActive():  # steps that arrive together are drawn once
                self._redraw.start()
        elif isinstance(event, BeamDone) and self.tree.chosen is not None:
            self._redraw.stop()
            self.panel.tree_view.refresh()
            self.show_node(self.tree.chosen if self._following else self.panel.tree_view.selected)
            self._fill_rows()
            if self.side.currentWidget() is not self.heads_scroll:  # a heads-off re-decode keeps its comparison
                self.side.setCurrentWidget(self.panel_scroll)
        return True

    @Slot()
    def _on_redraw(self) -> None:
        """The beam so far: the tree, and (unless a node was chosen) the best live hypothesis in every view."""
        if self.tree is None:
            return
        self.panel.tree_view.refresh()
        if self._following and self._best in self.tree.nodes:
            self.show_node(self._best, finished=False)

    def decoded(self) -> None:
        """The main decode ended: list the greedy path and compare with every head on."""
        if self.tree is None or self.tab.session is None:
            return
        if not self.beam:
            self.panel.tree_view.select(self._tip if self._tip != ROOT else None)
            self._fill_rows()
        after = [s.token for s in self.tab.session.steps if s.token != EOS]
        key = self._key()
        self._after = (key, after)
        if not self.decode.heads_off:
            self._baseline = (key, after)
        if self._baseline is not None and self._baseline[0] == key:
            self.heads_panel.show_pair(self._baseline[1], after)
        else:
            self.heads_panel.show_pair(None, after)
            translator, text, beam = self.tab.translator, self.text, self.beam
            base = self.decode.replace(heads_off=(), rescale_heads=False)
            self.base_worker.start(lambda stop: ((key, t) for t in final_tokens(translator, text, base, beam)))

    def _key(self) -> tuple:
        return id(self.tab.translator), self.text, self.beam, repr(self.decode.replace(heads_off=(),
                                                                                        rescale_heads=False))

    PAGE_MIN = 150  # px the search tree or heads-off page needs to show a few rows

    def make_room(self, splitter, index: int) -> None:
        """Opening the search tree or heads-off page on a short screen moves ``splitter`` (the tab's top over the
        attention panel) so the page shows a few rows, leaving the attention panel at least 220 px."""
        if index == 0:  # the step table is fine small
            return
        top, bottom = splitter.sizes()
        give = min(self.PAGE_MIN - self.side.currentWidget().height(), bottom - 220)
        if give > 0:
            splitter.setSizes([top + give, bottom - give])

    # -- showing a hypothesis ----------------------------------------------------------------------------------------

    @Slot(int)
    def choose(self, node_id: int) -> None:
        """A node clicked (or an n-best row): show that hypothesis everywhere."""
        if self.tab.worker.is_running() and not self.beam:
            self._say("Wait until the decode has finished, then choose a node.")
        elif self.tree is not None and node_id in self.tree.nodes:
            self._following = False
            self.tab._set_playing(False)
            self.show_node(node_id)

    def show_node(self, node_id: int, finished: bool = True) -> None:
        tab, steps = self.tab, self.tree.path(node_id)
        session = DecodeSession(tab.translator.detokenize, word_merger(tab.translator))
        session.add(self.tree.encoder)
        for step in steps:
            session.add(step)
        session.finished = finished
        tab.session = session
        tab.step_model.set_steps(steps)
        tab.slider.blockSignals(True)
        tab.slider.setRange(0, max(len(steps) - 1, 0))
        tab.slider.blockSignals(False)
        tab.go_to(len(steps) - 1)
        path, node = [], node_id
        while node != ROOT:
            path.append(node)
            node = self.tree.nodes[node].parent
        self.shown = path[::-1]
        self.panel.tree_view.select(node_id)
        self.panel.select_row(node_id)

    def _fill_rows(self) -> None:
        from attnviz.engine.search.beam import (
            length_penalty,  # imports torch: here, once a model is loaded, not at start
        )

        tree, detok = self.tree, self.tab.translator.detokenize
        rows = [(str(i + 1), n, detok([s.token for s in tree.path(n.id)]), n.normalised)
                for i, n in enumerate(tree.n_best(self.decode.beam if self.beam else 1))]
        tips = {b: tree.nodes[i] for b, i in self._branch_ends.items() if i in tree.nodes}
        alpha = self.decode.length_penalty if self.beam else 0.0  # a branch's end, ranked as the search ranks
        rows += [(f"what-if {b}", n, detok([s.token for s in tree.path(n.id)]),
                  None if n.normalised is None else n.score / length_penalty(n.step.index + 1, alpha))
                 for b, n in sorted(tips.items())]
        self.panel.set_rows(rows, self.panel.tree_view.selected)

    # -- what-if -----------------------------------------------------------------------------------------------------

    @Slot(str)
    def what_if(self, token: str) -> None:
        tab, translator = self.tab, self.tab.translator
        if tab.worker.is_running():
            self._say("Wait until the decode has finished, then choose another token.")
        elif self.tree is None or tab.session is None or not 0 <= tab.current < len(self.shown):
            self._say("Translate first, then choose a step (slider or output token) and another token for it.")
        elif not token:
            self._say("Type a token from the output vocabulary (or double-click one in the top-k chart).")
        elif token not in translator.tgt_vocab:
            self._say(f"{token!r} is not in the model's output vocabulary; the completion lists the tokens it knows.")
        else:
            node = self.tree.nodes[self.shown[tab.current]]
            if node.step.token == token:
                self._say(f"{token!r} is already the token taken at step {tab.current + 1}: choose another one.")
                return
            ids = self.tree.forced_ids(node.id, translator.tgt_vocab.encode([token])[0])
            self._start_branch(ids, node.parent, f"what if {token!r} at step {tab.current + 1}")

    @Slot(str)
    def force_prefix(self, text: str) -> None:
        if self.tree is None or self.tab.translator is None or self.tab.worker.is_running():
            self._say("Translate first (and let it finish): a forced prefix decodes the same sentence after the "
                      "words typed.")
            return
        try:
            ids = self.tab.translator.target_ids(text)
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
        translator, text, decode = self.tab.translator, self.text, self.decode
        self._branch_tip = parent
        if self.beam:
            self._graft = self.tree.graft(parent)
            self._branch = self._graft.branch
            job = lambda stop: translator.beam_steps(text, decode, forced=forced)  # noqa: E731
        else:
            self._graft, self._branch = None, self.tree.new_branch()
            job = lambda stop: translator.steps(text, decode, forced=forced)  # noqa: E731
        self.tab._show_message("")
        self.tab.status.emit(f"Decoding what-if branch {self._branch}: {what}...")
        self.branch_worker.start(job)

    @Slot(object)
    def _on_branch_event(self, event) -> None:
        if self.tree is None:
            return
        if self._graft is not None and isinstance(event, (BeamStep, BeamDone)):
            self._graft.add(event)
            if self._graft.ranking:
                self._branch_tip = self._graft.ranking[0]
            self.panel.tree_view.refresh()
        elif isinstance(event, DecodeStep):
            ids = self.tree.add_chain([event], self._branch_tip, self._branch)
            if ids:
                self._branch_tip = ids[-1]
                self.panel.tree_view.refresh()

    @Slot()
    def _on_branch_finished(self) -> None:
        if self.tree is None or self._branch_tip not in self.tree.nodes:
            return
        self._branch_ends[self._branch] = self._branch_tip
        self._following = False
        self.show_node(self._branch_tip)
        self._fill_rows()
        self.side.setCurrentWidget(self.panel_scroll)
        self.tab.status.emit(f"What-if branch {self._branch}: {self.tab.translation_text.edit.text()}")

    @Slot(str)
    def _on_failed(self, message: str) -> None:
        self._say(message)

    def _say(self, text: str) -> None:
        self.tab._show_message(text)
        self.tab.status.emit(text)

    # -- heads off ---------------------------------------------------------------------------------------------------

    @Slot(str, int, int)
    def toggle_head(self, kind: str, layer: int, head: int) -> None:
        heads = range(self.tab.attention.grid.shape()[1]) if head < 0 else [head]
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
        self.tab.attention.heads_off = tuple(sorted(self.heads_off))
        session = self.tab.session
        layout = {k: session.maps(k, -1).shape[:2] for k in session.kinds()} if session and session.steps else None
        self.heads_panel.set_off(format_heads(self.heads_off, layout), len(self.heads_off))
        if not redecode:
            return
        self.side.setCurrentWidget(self.heads_scroll)
        if self.tree is not None and self.tab.translator is not None:
            self.tab.source_edit.setText(self.text)
            self.tab.translate()  # cancels a running decode
        else:
            self.tab.attention.redraw()

    @Slot(object)
    def _on_base_event(self, result) -> None:
        key, tokens = result
        self._baseline = (key, [t for t in tokens if t != EOS])
        if self._after is not None and self._after[0] == key:
            self.heads_panel.show_pair(self._baseline[1], self._after[1])
