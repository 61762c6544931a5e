"""Search: greedy and sampled decoding, beam search, the search tree and heads switched off, as events."""
