"""The attention views every tab reuses: the heatmap, the grid of every head, colour maps."""
