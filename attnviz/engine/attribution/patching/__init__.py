"""Activation patching (causal tracing, Meng et al. 2022): the corrupted source (``corrupted``), the batched patched
runs (``runs``) and the method's generator (``method``); registered by ``attribution.patching_method``."""
