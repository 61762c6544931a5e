"""Plain translation without torch: a MarianMT folder's greedy and beam search in numpy, over its weights
read as stored, for ``attnviz translate`` when no attention is captured (``engine.plain.translator``).

It chooses the same tokens as the torch path (``engine.translator``): the same search loops
(``engine.search.batch``), the same rules, float32 throughout; the network's sums run in another order, so two
candidates whose scores agree to float32's last bits (an exact near-tie) may be ranked the other way
(tests/engine/test_plain.py compares the tokens and the logits at every step of both paths).
"""
