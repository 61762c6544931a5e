"""Imported model folders: the folder-format registry and one module per format, registering itself (see
``registry`` for how a format is added)."""

from attnviz.engine.hub.registry import (
    FolderFormat,
    FolderPlan,
    all_formats,
    find_format,
    format_of,
    register,
    registered,
    unregister,
)

__all__ = ["FolderFormat", "FolderPlan", "all_formats", "find_format", "format_of", "register", "registered",
           "unregister"]
