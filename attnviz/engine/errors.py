"""The engine's exceptions: each message says what was wrong and what to do, so every consumer can show it as is."""


class AttnvizError(Exception):
    """Base class of every error a user can cause; the CLI prints it, the GUI shows it in a dialog."""


class ConfigError(AttnvizError, ValueError):
    """A setting has an impossible value."""


class CheckpointError(AttnvizError):
    """A checkpoint file is missing, damaged, unsafe or incompatible."""


class InputError(AttnvizError, ValueError):
    """Text given to the model cannot be translated (for example, it is empty)."""


class DataError(AttnvizError):
    """A corpus file is missing or malformed."""
