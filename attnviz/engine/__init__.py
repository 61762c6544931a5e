"""The Qt-free engine: tokenizers, vocabularies, models, decoding, training and checkpoints.

Importing this package is cheap; torch and spaCy load only when a submodule that needs them is imported.
"""
