"""A contrastive foil from a what-if branch (issue 27: "the foil comes from the top-k chart or a what-if branch"):
the branch's row in the n-best list asks "Why this and not <the branch's token>?", which shows the answer at the
step where the branch leaves it and computes the contrast with that token."""

from tests.gui.conftest import translate

SENTENCE = "q1 q2 q3 q1"

def _idle(tab) -> bool:
    return tab.document.finished and not tab.search.branch_worker.is_running() and not tab.worker.is_running()


def test_a_branch_row_asks_why_the_answer_and_not_the_branchs_token(qtbot, loaded):
    tab = translate(qtbot, loaded, SENTENCE)
    answer = [s.token for s in tab.document.steps]
    tab.go_to(1)
    other = next(t for t in ("w1", "w2", "w3", "q1") if t != answer[1] and t in loaded.translator.tgt_vocab)
    tab.search.what_if(other)
    panel = tab.search.panel
    qtbot.waitUntil(lambda: panel.nbest.rowCount() == 2 and _idle(tab), timeout=20000)  # the branch has ended
    labels = [panel.nbest.item(r, 0).text() for r in range(panel.nbest.rowCount())]
    assert labels == ["1", "what-if 1"]
    assert [a.text() for a in panel.row_menu(0).actions()][-1] == "Copy &all"  # the answer: nothing to contrast
    why = panel.row_menu(1).actions()[-1]
    assert why.text() == f"Why this and not {other!r}?"
    why.trigger()
    qtbot.waitUntil(lambda: tab.quantity.result is not None and tab.quantity.result.settings.get("foil") == other,
                    timeout=20000)
    first = next(q for q in tab.quantity.quantities if "foil" in q.reads and not q.why_not)
    assert tab.quantity.result.quantity.key == first.key  # from attention: the first method that takes a foil
    assert [s.token for s in tab.document.steps] == answer  # the answer is shown again, at the branch's step
    assert tab.document.current == 1
