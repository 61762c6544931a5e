"""Corpora: reading and checking parallel text, downloading the public sets, batching."""
