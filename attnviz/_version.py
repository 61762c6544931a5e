"""The version of attnviz: a leaf module, so checkpoints can record it without importing the package root."""

__version__ = "0.1.0"
