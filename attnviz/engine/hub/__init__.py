"""Models as they are held on disk: the format registry and one module per format (attnviz's checkpoint file,
each imported folder format), registering itself (see ``registry`` for how a format is added)."""

from attnviz.engine.hub.registry import (
    FolderFormat,
    FolderPlan,
    all_formats,
    file_formats,
    find_format,
    folder_formats,
    format_of,
    register,
    registered,
    unregister,
)

__all__ = ["FolderFormat", "FolderPlan", "all_formats", "file_formats", "find_format", "folder_formats", "format_of",
           "register", "registered", "unregister"]
