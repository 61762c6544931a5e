"""What the attention panel reads (its source) and how a heatmap is laid out, as pure functions."""
