"""Checkpoints: safetensors files, the header schema checked before anything is built, the torch-free card."""
