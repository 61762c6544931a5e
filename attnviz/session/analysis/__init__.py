"""The Analysis tab's run document."""
