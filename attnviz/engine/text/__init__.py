"""Text: per-language tokenizers and the vocabularies that own the special tokens."""
