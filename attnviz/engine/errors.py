"""The engine's exceptions: each message says what was wrong and what to do, so every consumer can show it as is.

Messages speak of settings (``train.device``, "the data folder"), never of one front end's controls; an error may
name the settings it concerns (``settings``) and the missing corpus (``corpus``) so that the CLI can add its flags
and the GUI its buttons.
"""

from __future__ import annotations


def cut(text: str) -> str:
    """A value as a message shows it: a 5,000-character one is cut, so that the error stays one readable line."""
    return text if len(text) <= 40 else text[:20] + "..." + text[-8:]


def quoted(text: str) -> str:
    """``cut(text)`` in quotes, as a message quotes a value given."""
    return repr(cut(text))


def check_on_cpu(translator: object, what: str) -> None:
    """Refuse ``what`` (an analysis) of a model placed on a GPU: decoding alone runs there (``Translator.device``;
    a model without one runs on the CPU)."""
    device = str(getattr(translator, "device", "cpu"))
    if not device.startswith("cpu"):
        raise InputError(f"{what} runs on the CPU, and this model is on {device}: move it back first "
                         "(translator.to_device('cpu')); on a GPU attnviz only decodes (translate, generate).")


class AttnvizError(Exception):
    """Base class of every error a user can cause; the CLI prints it, the GUI shows it in a dialog."""

    def __init__(self, message: str, *, settings: tuple[str, ...] = (), corpus: str | None = None):
        super().__init__(message)
        self.settings = settings  # what the user can change to fix it ("device", "data_dir", "preset"...)
        self.corpus = corpus  # a corpus that can be downloaded to fix it


class ConfigError(AttnvizError, ValueError):
    """A setting has an impossible value."""


class CheckpointError(AttnvizError):
    """A checkpoint file is missing, damaged, unsafe or incompatible."""


class InputError(AttnvizError, ValueError):
    """Text given to the model cannot be translated (for example, it is empty)."""


class NotTextError(InputError, TypeError):
    """Something other than text (``bytes``, a number) was given where the engine reads text. A ``TypeError`` too, as
    Python's convention for a wrong argument type, so that no caller takes it for a sentence that cannot be
    translated."""


class DataError(AttnvizError):
    """A corpus file is missing or malformed."""


def is_panic(exc: BaseException) -> bool:
    """Whether ``exc`` is a Rust library's panic (tokenizers' ``pyo3_runtime.PanicException``), which derives from
    BaseException and so passes every ``except Exception``: a hostile tokenizer file's regex can raise it."""
    return type(exc).__name__ == "PanicException"
