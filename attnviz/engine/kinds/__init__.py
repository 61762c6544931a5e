"""Model kinds: the registry and one module per kind (see ``registry`` for how a kind is added)."""

from attnviz.engine.kinds.registry import (
    ModelKind,
    all_kinds,
    check,
    check_training,
    get_kind,
    kind_names,
    kind_of,
    register,
    registered,
    unregister,
)

__all__ = ["ModelKind", "all_kinds", "check", "check_training", "get_kind", "kind_names", "kind_of",
           "register", "registered", "unregister"]
