"""The Analysis tab's wing: head statistics, alignment, head importance."""
