"""matplotlib drawing on a given Figure or Axes: no pyplot state, no Qt. Used for export and for curves."""
