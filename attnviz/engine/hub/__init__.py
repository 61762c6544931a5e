"""Imported model folders (MarianMT today): one module per folder format, registering itself."""
