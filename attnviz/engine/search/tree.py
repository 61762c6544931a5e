"""The tree of hypotheses a user explores: a beam search's candidates, a greedy path, and what-if branches.

``SearchTree`` consumes a decode's events, the one place that does: ``BeamStep``/``BeamDone`` from
``beam.beam_steps`` and ``DecodeStep``s from ``greedy.decode_steps`` (a main path), one at a time (``add``, as the GUI
receives them) or a whole decode at once (``from_events``, as the CLI runs it). It answers what a view asks of a
node: its path of steps, its whole ``Translation`` with every attention map, the ids to force for a what-if branch,
the n-best list, and the search's answer (``answer``: the chosen hypothesis as a ``Translation``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import TypeAlias

from attnviz.engine.events import BeamDone, BeamNode, BeamStep, DecodeStep, EncoderPass, Translation, assemble
from attnviz.engine.text.vocab import EOS_ID

ROOT = -1

SearchEvent: TypeAlias = EncoderPass | DecodeStep | BeamStep | BeamDone  # what a decode (greedy or beam) yields


class SearchTree:
    def __init__(self, encoder: EncoderPass):
        self.encoder = encoder
        self.nodes: dict[int, BeamNode] = {}
        self.ranking: tuple[int, ...] = ()  # finished hypotheses, best first (a beam search's, or the greedy end)
        self.branches = 0  # what-if branches added so far
        self.tip = ROOT  # the end of the main greedy path so far
        self.leader = ROOT  # the best live hypothesis of a running beam search

    @classmethod
    def from_events(cls, events: Iterable[SearchEvent]) -> SearchTree:
        """The tree of a whole decode: its ``EncoderPass``, then its ``DecodeStep``s (greedy or sampled) or its
        ``BeamStep``s and ``BeamDone``."""
        stream = iter(events)
        first = next(stream, None)
        if not isinstance(first, EncoderPass):
            raise ValueError(f"a decode's events start with its EncoderPass, not {type(first).__name__}")
        tree = cls(first)
        for event in stream:
            if isinstance(event, EncoderPass):
                raise ValueError("one decode has one EncoderPass")
            tree.add(event)
        return tree

    # -- building ---------------------------------------------------------------------------------------------------

    def add(self, event: DecodeStep | BeamStep | BeamDone) -> list[int]:
        """Take one event of the decode this tree was started with; returns the ids of the nodes it added.

        A ``DecodeStep`` extends the main path (which then is the answer); a ``BeamStep`` adds its candidates and
        moves ``leader``; a ``BeamDone`` ranks the finished hypotheses."""
        if isinstance(event, DecodeStep):
            ids = self.add_chain([event], self.tip)
            if ids:
                self.tip = ids[-1]
                self.ranking = (self.tip,)
            return ids
        if isinstance(event, BeamStep):
            self.nodes.update((n.id, n) for n in event.nodes)
            alive = event.alive
            if alive:
                self.leader = max(alive, key=lambda n: n.score).id
            return [n.id for n in event.nodes]
        self.ranking = event.ranking
        return []

    def add_chain(self, steps: Iterable[DecodeStep], parent: int = ROOT, branch: int = 0) -> list[int]:
        """Hang a greedy or sampled path under ``parent``; steps at or before the parent's position (a forced
        prefix that repeats the parent's path) are skipped. Returns the new node ids, in order."""
        start = self.depth(parent)
        score = self.nodes[parent].score if parent != ROOT else 0.0
        ids = []
        for step in steps:
            if step.index < start:
                continue
            score += _logp(step)
            node_id = self.next_id()
            ended = step.token_id == EOS_ID
            self.nodes[node_id] = BeamNode(node_id, parent, step, score, "finished" if ended else "alive",
                                           score if ended else None, branch)
            parent = node_id
            ids.append(node_id)
        if branch == 0 and ids and not self.ranking:
            self.ranking = (ids[-1],)
        return ids

    def next_id(self) -> int:
        return max(self.nodes, default=ROOT) + 1

    def new_branch(self) -> int:
        """The number of the next what-if branch."""
        self.branches += 1
        return self.branches

    def add_branch(self, steps: Iterable[DecodeStep], parent: int) -> list[int]:
        """A what-if branch: a path decoded with a forced prefix that leaves the tree below ``parent``."""
        return self.add_chain(steps, parent, self.new_branch())

    def graft(self, parent: int) -> Graft:
        """A what-if branch searched by beam after a forced prefix, to be fed its events (``Graft.add``)."""
        return Graft(self, parent, self.new_branch())

    # -- reading ----------------------------------------------------------------------------------------------------

    @property
    def chosen(self) -> int | None:
        """The search's answer: the best finished hypothesis, or the end of the greedy path."""
        return self.ranking[0] if self.ranking else None

    def answer(self, detokenize: Callable[[Sequence[str]], str]) -> Translation | None:
        """The chosen hypothesis with all its attention; None when nothing was chosen (no step, or no hypothesis
        finished)."""
        return None if self.chosen is None else self.translation(self.chosen, detokenize)

    def depth(self, node_id: int) -> int:
        """Tokens on the path to ``node_id`` (0 for the root)."""
        return 0 if node_id == ROOT else self.nodes[node_id].step.index + 1

    def children(self, node_id: int) -> list[BeamNode]:
        return [n for n in self.nodes.values() if n.parent == node_id]

    def path_ids(self, node_id: int) -> list[int]:
        """The node ids from the root's child to ``node_id``, in order."""
        ids = []
        while node_id != ROOT:
            ids.append(node_id)
            node_id = self.nodes[node_id].parent
        return ids[::-1]

    def path(self, node_id: int) -> list[DecodeStep]:
        """The steps from the root to ``node_id``, in order."""
        return [self.nodes[i].step for i in self.path_ids(node_id)]

    def on_path(self, node_id: int | None) -> set[int]:
        """The node ids from the root to ``node_id``."""
        return set(self.path_ids(node_id)) if node_id is not None else set()

    def translation(self, node_id: int, detokenize: Callable[[Sequence[str]], str]) -> Translation:
        """The hypothesis ending at ``node_id`` with all its attention, as a greedy decode would give it."""
        steps = self.path(node_id)
        return assemble(self.encoder, steps, detokenize([s.token for s in steps]))

    def forced_ids(self, node_id: int, token_id: int) -> list[int]:
        """The prefix a what-if decode forces: the path up to ``node_id``'s parent, then ``token_id`` in its place."""
        return [s.token_id for s in self.path(self.nodes[node_id].parent)] + [token_id]

    def n_best(self, k: int) -> list[BeamNode]:
        return [self.nodes[i] for i in self.ranking[:k]]


class Graft:
    """Hangs a beam search decoded after a forced prefix (the path to ``parent``, then the what-if token) under
    ``parent``: the nodes of the repeated prefix are dropped, the others join the tree with fresh ids in branch
    ``branch``. ``ranking`` is the branch's finished nodes, best first, once its ``BeamDone`` arrived."""

    def __init__(self, tree: SearchTree, parent: int, branch: int):
        self.tree, self.parent, self.branch = tree, parent, branch
        self.start = tree.depth(parent)  # the what-if token's position
        self.ids: dict[int, int] = {ROOT: ROOT}  # the search's node id -> the tree's
        self.ranking: tuple[int, ...] = ()

    def add(self, event: BeamStep | BeamDone) -> list[int]:
        """Take one event; returns the tree ids of the nodes it added."""
        if isinstance(event, BeamDone):
            self.ranking = tuple(self.ids[i] for i in event.ranking if i in self.ids)
            return []
        added = []
        for node in event.nodes:
            if node.step.index < self.start:  # the forced path to the parent, already in the tree
                if node.status == "alive":
                    self.ids[node.id] = self.parent
                continue
            new_id = self.tree.next_id()
            self.ids[node.id] = new_id
            self.tree.nodes[new_id] = replace(node, id=new_id, parent=self.ids[node.parent], branch=self.branch)
            added.append(new_id)
        return added


def _logp(step: DecodeStep) -> float:
    return math.log(step.probability) if step.probability > 0 else float("-inf")
