"""One decode of the Translate tab, held in one place: what was asked, the encoder pass, the search tree its events
grow, the hypothesis and the step shown, whether it finished, and its what-if branches. Plain Python (no Qt, no torch).

The tab feeds it the worker's events (``add``), the search explorer its branches' (``add_branch``) and the node a
user picks (``show_node``); no view keeps a copy. The step table, the token strips, the attention panel and the
explorer read the document and listen to it: each listener, a plain callable, is told every ``DocumentChange`` in
the order they happen (a change made while listeners are being told, such as a listener moving to the new step, is
told once the current change has reached every listener). Views cut at a step (``translation``, ``view``, ``maps``,
``heatmap``, ``cross_row``, ``cross_column``) are assembled once per length and the latest kept (``cut_views``), so
scrubbing back is instant.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple, TypeAlias

import numpy as np

from attnviz.engine.config import DecodeConfig, ModelConfig
from attnviz.engine.events import (
    ATTENTION_KINDS,
    AttentionKind,
    BeamDone,
    BeamNode,
    BeamStep,
    DecodeStep,
    EncoderPass,
    Translation,
)
from attnviz.engine.kinds import ModelKind
from attnviz.engine.search.limit import capped_limit, limit_warning, reached_limit
from attnviz.engine.search.tree import Graft, SearchEvent, SearchTree
from attnviz.engine.subwords import WordAttention
from attnviz.engine.text.tokenize import visible_token
from attnviz.session.translate.changes import (
    Cleared,
    DocumentChange,
    Encoded,
    Finished,
    Listener,
    PathShown,
    SearchRanked,
    StepAdded,
    StepShown,
    TreeGrew,
)
from attnviz.session.translate.cut_views import CutViews, Detokenize, Merger

Heatmap: TypeAlias = tuple[np.ndarray, tuple[str, ...], tuple[str, ...], int | None]  # matrix, rows, cols, highlight


@dataclass(frozen=True)
class DecodeRequest:
    """What a decode was asked: the text, its settings, and whether it is a beam search."""

    text: str
    decode: DecodeConfig
    beam: bool


class Hypothesis(NamedTuple):
    """One row of the n-best list."""

    label: str  # its rank ("1", "2"...), or "what-if k" for the end of branch k
    node: BeamNode
    text: str


@dataclass
class _Branch:
    """The what-if branch decoding now: its number, the node it has reached, and its graft when it is a beam."""

    number: int
    tip: int
    graft: Graft | None


class DecodeDocument:
    """The Translate tab's one decode (see the module's docstring): fed events, read by views, telling listeners."""

    def __init__(self) -> None:
        self._listeners: list[Listener] = []
        self._pending: deque[DocumentChange] = deque()
        self._telling = False
        self._holding = False  # inside ``add_all``: the step or path shown waits for the batch's end
        self._held: StepShown | PathShown | None = None
        self._clear(None, " ".join, None)

    def _clear(self, request: DecodeRequest | None, detokenize: Detokenize, merger: Merger | None,
               model: tuple[ModelKind, ModelConfig] | None = None) -> None:
        self.request, self.detokenize, self.merger = request, detokenize, merger
        self.model = model  # the decoding model's kind and config: how its views are named and drawn
        self.tree: SearchTree | None = None
        self.steps: list[DecodeStep] = []  # the hypothesis shown, in order
        self.shown: list[int] = []  # its node ids in the tree
        self.current = -1  # the step shown; -1: only the encoder pass
        self.finished = False
        self.branch_ends: dict[int, int] = {}  # what-if branch -> its end (a beam branch's best finished node)
        self._branch: _Branch | None = None
        self._views = CutViews()  # views cut at a step, the latest kept

    # -- listeners ---------------------------------------------------------------------------------------------------

    def subscribe(self, listener: Listener) -> None:
        """Tell ``listener`` every change from now on, after the listeners subscribed before it."""
        self._listeners.append(listener)

    def _tell(self, change: DocumentChange) -> None:
        if self._holding and isinstance(change, (StepShown, PathShown)):
            # a batch shows its last step once (``add_all``); a path shown outranks a step of it shown after
            if not isinstance(self._held, PathShown) or isinstance(change, PathShown):
                self._held = change
            return
        self._pending.append(change)
        if self._telling:
            return  # told when the change being told has reached every listener
        self._telling = True
        try:
            while self._pending:
                told = self._pending.popleft()
                for listener in list(self._listeners):
                    listener(told)
        finally:
            self._telling = False
            self._pending.clear()  # a listener failed: what it left queued described a state that has moved on

    # -- the decode --------------------------------------------------------------------------------------------------

    def reset(self) -> None:
        """No decode: the document is empty."""
        self._clear(None, " ".join, None)
        self._tell(Cleared())

    def start(self, request: DecodeRequest, detokenize: Detokenize, merger: Merger | None = None,
              model: tuple[ModelKind, ModelConfig] | None = None) -> None:
        """A new decode was asked; its events follow (``add``). ``detokenize``, ``merger`` and ``model`` (its kind
        and config) are the model's."""
        self._clear(request, detokenize, merger, model)
        self._tell(Cleared())

    def add(self, event: SearchEvent) -> None:
        """One event of the main decode: its encoder pass, then its greedy steps or its beam steps and end."""
        if self.request is None:
            return  # nothing was asked (a reset): a late event of an older decode
        if isinstance(event, EncoderPass):
            self.tree, self.steps, self.shown, self.current, self.finished = SearchTree(event), [], [], -1, False
            self._forget_views()
            self._tell(Encoded(event))
            return
        if self.tree is None:
            return  # a decode's first event is its encoder pass; anything else belongs to an older decode
        added = self.tree.add(event)
        if isinstance(event, DecodeStep):
            self.steps.append(event)
            self.shown += added
            self._tell(StepAdded(len(self.steps) - 1))
        elif isinstance(event, BeamStep):
            self._tell(TreeGrew(tuple(added), 0))
        else:
            self._tell(SearchRanked(self.tree.chosen))

    def add_all(self, events: Sequence[SearchEvent]) -> None:
        """Events that arrived together (a worker's batch), each added as ``add`` adds it, with the step or path
        shown told once, after the last: the views redraw once per batch, not once per step, so a fast decode
        cannot hold the window's event loop for seconds."""
        self._holding, self._held = True, None
        try:
            for event in events:
                self.add(event)
        finally:
            held, self._holding, self._held = self._held, False, None
            if held is not None:
                self._tell(held)

    def finish(self) -> None:
        """The decode's worker ended (after its last event, or after a failure)."""
        if self.request is not None:
            self.finished = True
            self._tell(Finished())

    @property
    def encoder(self) -> EncoderPass | None:
        return self.tree.encoder if self.tree is not None else None

    @property
    def src_tokens(self) -> tuple[str, ...]:
        return self.tree.encoder.src_tokens if self.tree is not None else ()

    @property
    def node(self) -> int | None:
        """The node whose hypothesis is shown (None before the first step)."""
        return self.shown[-1] if self.shown else None

    def text(self) -> str:
        """The hypothesis shown as text: all of it once finished, else up to the step shown."""
        steps = self.steps if self.finished else self.steps[: self.current + 1]
        return self.detokenize([s.token for s in steps])

    def warnings(self, max_target_len: int, setting: str) -> list[str]:
        """The input's warnings and, when the finished hypothesis shown was cut at its step limit instead of ending
        with ``<eos>`` (the length asked, capped by the model's ``max_target_len``), the warning the command line
        gives, naming ``setting`` (how the user raises the limit)."""
        found = list(self.encoder.warnings) if self.encoder is not None else []
        limit = self.stopped_at_limit(max_target_len)
        if limit is not None and self.request is not None:
            found.append(limit_warning(limit, setting, self.request.decode.forced_eos >= 0))
        return found

    def stopped_at_limit(self, max_target_len: int) -> int | None:
        """The step limit at which the finished hypothesis shown stopped instead of choosing ``<eos>`` (the length
        asked, capped by the model's ``max_target_len``; an end token the model's settings force there was not
        chosen), or None."""
        if self.request is None or not self.finished:
            return None
        limit = capped_limit(self.request.decode.max_len, max_target_len)
        forced_end = self.request.decode.forced_eos >= 0
        return limit if reached_limit([s.token for s in self.steps], limit, forced_end) else None

    def kept_maps(self) -> tuple[int, str]:
        """The bytes the decode's captured attention takes (the encoder's or prompt's maps and each step's new query
        rows, every candidate's in a beam search) and their precision; the whole maps are rebuilt when shown."""
        arrays = [] if self.encoder is None else [self.encoder.encoder_attention]
        nodes = self.tree.nodes.values() if self.tree is not None else ()
        arrays += [a for node in nodes for a in (node.step.self_attention, node.step.cross_attention)]
        kept = [a for a in arrays if a is not None]
        return sum(a.nbytes for a in kept), str(kept[0].dtype) if kept else "float32"

    # -- what is shown -----------------------------------------------------------------------------------------------

    def show_node(self, node_id: int, finished: bool = True) -> None:
        """Show the hypothesis ending at ``node_id`` (any node of the tree) at its last step."""
        if self.tree is None or node_id not in self.tree.nodes:
            return
        self.shown = self.tree.path_ids(node_id)
        self.steps = [self.tree.nodes[i].step for i in self.shown]
        self.finished, self.current = finished, len(self.steps) - 1
        self._forget_views()
        self._tell(PathShown(node_id))

    def go_to(self, step: int) -> None:
        """Show step ``step`` of the hypothesis (clamped to its steps); nothing happens before the first step."""
        if not self.steps:
            return
        self.current = max(0, min(step, len(self.steps) - 1))
        self._tell(StepShown(self.current))

    # -- what-if branches --------------------------------------------------------------------------------------------

    def begin_branch(self, parent: int) -> int:
        """A what-if branch leaves the tree below ``parent``, decoded as the main decode was: a beam search grafted
        there in beam mode, else a path. Returns its number; its events go to ``add_branch``."""
        if self.tree is None or self.request is None:
            raise RuntimeError("a what-if branch needs a decode to branch from")
        graft = self.tree.graft(parent) if self.request.beam else None
        number = graft.branch if graft is not None else self.tree.new_branch()
        self._branch = _Branch(number, parent, graft)
        return number

    def add_branch(self, event: SearchEvent) -> None:
        branch, tree = self._branch, self.tree
        if branch is None or tree is None:
            return
        if branch.graft is not None and isinstance(event, (BeamStep, BeamDone)):
            added = branch.graft.add(event)
            if branch.graft.ranking:
                branch.tip = branch.graft.ranking[0]
        elif isinstance(event, DecodeStep):
            added = tree.add_chain([event], branch.tip, branch.number)
            if not added:
                return
            branch.tip = added[-1]
        else:
            return
        self._tell(TreeGrew(tuple(added), branch.number))

    def end_branch(self) -> tuple[int, int] | None:
        """The branch's decode ended: (its number, its end), recorded for the n-best list; None when it added no
        node to end at."""
        branch, self._branch = self._branch, None
        if branch is None or self.tree is None or branch.tip not in self.tree.nodes:
            return None
        self.branch_ends[branch.number] = branch.tip
        return branch.number, branch.tip

    def hypotheses(self) -> list[Hypothesis]:
        """The n-best list: the search's finished hypotheses, best first (the greedy path's end), then the end of
        each what-if branch."""
        tree, request = self.tree, self.request
        if tree is None or request is None:
            return []
        def text(node_id: int) -> str:
            return self.detokenize([s.token for s in tree.path(node_id)])

        rows = [Hypothesis(str(i + 1), n, text(n.id))
                for i, n in enumerate(tree.n_best(request.decode.beam if request.beam else 1))]
        return rows + [Hypothesis(f"what-if {b}", tree.nodes[i], text(i))
                       for b, i in sorted(self.branch_ends.items()) if i in tree.nodes]

    # -- views cut at a step -----------------------------------------------------------------------------------------

    def _forget_views(self) -> None:
        self._views.clear()

    @property
    def mergeable(self) -> bool:
        """Whether the pieces can be merged into words (a subword model)."""
        return self.merger is not None

    def kinds(self) -> list[str]:
        """Attention kinds this model produced, in the canonical order."""
        encoder = self.encoder
        if encoder is None:
            return []
        have = {"encoder"} if encoder.encoder_attention is not None else set()
        if self.steps:
            have |= {"decoder"} if self.steps[0].self_attention is not None else set()
            have |= {"cross"} if self.steps[0].cross_attention is not None else set()
        order = self.model[0].attention_kinds if self.model is not None else tuple(ATTENTION_KINDS)
        return [k for k in order if k in have]

    def kind_info(self, kind: str) -> AttentionKind:
        """What the views call an attention kind for this model (an LLM's "cross" is its output over the prompt)."""
        return self.model[0].view(kind) if self.model is not None else ATTENTION_KINDS[kind]

    def shared(self, kind: str) -> tuple[str, ...]:
        """The attention kinds whose heads are ``kind``'s (an LLM's three views of its one attention)."""
        return self.model[0].shared(kind) if self.model is not None else (kind,)

    def kv_heads(self) -> int:
        """Key/value heads under grouped-query attention (0: every head its own)."""
        return self.model[0].kv_heads(self.model[1]) if self.model is not None else 0

    def outside(self, kind: str, layer: int, rows: int, cols: int) -> np.ndarray | None:
        """[rows, cols] True at the cells of ``kind``'s map that ``layer``'s sliding window leaves out."""
        if self.model is None or self.encoder is None:
            return None
        return self.model[0].outside_window(self.model[1], kind, layer, len(self.encoder.src_tokens), rows, cols)

    def head_layout(self) -> dict[str, tuple[int, int]]:
        """(layers, heads) of each kind the views can show now."""
        shapes = {k: self.maps(k, -1) for k in self.kinds()}
        return {k: (m.shape[0], m.shape[1]) for k, m in shapes.items() if m is not None}

    def translation(self, upto: int) -> Translation:
        """The translation made of steps 0..upto (all of them when upto is -1 or past the end)."""
        encoder = self.encoder
        if encoder is None:
            raise ValueError("no encoder pass yet: nothing to assemble")
        n = len(self.steps) if upto < 0 else min(upto + 1, len(self.steps))
        return self._views.translation(encoder, self.steps[:n], self.detokenize)

    def view(self, upto: int, merged: bool = False) -> Translation | WordAttention:
        """What the attention views show as of step ``upto``: the translation, or (``merged``) its pieces merged
        into words."""
        t = self.translation(upto)
        return t if not merged or self.merger is None else self._views.merged(t, self.merger)

    def maps(self, kind: str, upto: int, merged: bool = False) -> np.ndarray | None:
        """[L, H, R, C] of one kind as of step ``upto`` (words when ``merged``)."""
        if self.encoder is None:
            return None
        return self.view(upto, merged).attention.get(kind)

    def heatmap(self, kind: str, layer: int, head: int | None, upto: int, merged: bool = False) -> Heatmap | None:
        """(matrix [R, C], row labels, column labels, highlighted row) for one layer and head (None = mean)."""
        maps = self.maps(kind, upto, merged)
        if maps is None:
            return None
        layer = min(layer, maps.shape[0] - 1)
        matrix = maps[layer].mean(axis=0) if head is None else maps[layer, min(head, maps.shape[1] - 1)]
        view = self.view(upto, merged)
        rows, cols = (tuple(visible_token(t) for t in axis) for axis in view.axis_labels(kind))
        if kind == "encoder":
            highlight = None
        elif isinstance(view, WordAttention):  # merged as of this step: its last word holds the step
            highlight = len(rows) - 1
        else:
            highlight = min(upto, len(rows) - 1) if upto >= 0 else len(rows) - 1
        return matrix, rows, cols, highlight

    def cross_row(self, step: int, layer: int, head: int | None) -> np.ndarray | None:
        """Cross-attention of output step ``step`` over the source [S]."""
        cross = self.steps[step].cross_attention if 0 <= step < len(self.steps) else None
        if cross is None:
            return None
        rows = cross[min(layer, cross.shape[0] - 1)].astype(np.float32)  # kept in float16 for an LLM
        return rows.mean(axis=0) if head is None else rows[head]

    def cross_column(self, src_index: int, upto: int, layer: int, head: int | None) -> np.ndarray | None:
        """How much each output step up to ``upto`` attended to source token ``src_index`` [T] (token strips show
        pieces, so this reads the unmerged maps)."""
        maps = self.translation(upto).attention.get("cross") if self.encoder is not None else None
        if maps is None or not 0 <= src_index < maps.shape[-1]:
            return None
        layer_maps = maps[min(layer, maps.shape[0] - 1)]
        return (layer_maps.mean(axis=0) if head is None else layer_maps[head])[:, src_index]
