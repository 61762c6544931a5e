"""A loaded model in the notebook API (``Model``, from ``load``): a bundled model by name, a checkpoint file or an
imported model's folder, opened by the engine's loader (``engine.loading``), with ``translate`` for one sentence
and ``heads`` for a corpus.
"""

from __future__ import annotations

import html
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from attnviz.api.results import TranslationResult
from attnviz.api.tables import HeadStatistics
from attnviz.engine.errors import InputError
from attnviz.paths import bundled_model_files

if TYPE_CHECKING:
    from attnviz.engine.checkpoints.card import ModelCard
    from attnviz.engine.config import DecodeConfig
    from attnviz.engine.translator import Translator

SUFFIX = ".safetensors"


def bundled() -> tuple[str, ...]:
    """The names of the models shipped with attnviz (``load`` takes them), the default one first."""
    return tuple(path.name.removesuffix(SUFFIX) for path in bundled_model_files())


def resolve(name: str | os.PathLike[str]) -> str:
    """The path ``load`` opens: an existing file or folder as given, else a bundled model's name (with or without
    ``.safetensors``), else a Hugging Face cache or Ollama name (``ORG/NAME``, ``ollama:NAME[:TAG]``: refused with
    what was looked for); anything else is refused with the bundled names."""
    from attnviz.engine.hub.names import HUB_NAME, OLLAMA, model_path

    if isinstance(name, os.PathLike) or (isinstance(name, str) and name.strip()):
        path = Path(name).expanduser()
        if path.exists():
            return str(path)
        for file in bundled_model_files():
            if str(name) in (file.name, file.name.removesuffix(SUFFIX)):
                return str(file)
        if str(name).startswith(OLLAMA) or HUB_NAME.match(str(name)):
            return str(model_path(name))
    names = ", ".join(bundled()) or "none (this installation has no models/ folder)"
    raise InputError(f"no model file, folder or bundled model called {name!r}; give the path of a .safetensors "
                     f"checkpoint or of a model folder, or a bundled name: {names}")


@dataclass(frozen=True)
class Model:
    """A model ready to translate. ``translator`` is the engine's facade (``attnviz.engine.translator``), for
    everything this API does not wrap: step events, beam events, the probe points."""

    path: str
    translator: Translator = field(repr=False)

    @property
    def card(self) -> ModelCard:
        """What the checkpoint says about itself: languages, kind, sizes, metrics, training history."""
        return self.translator.card

    @property
    def name(self) -> str:
        return self.card.name or Path(self.path).name

    @property
    def layout(self) -> dict[str, tuple[int, int]]:
        """Attention kind -> (layers, heads)."""
        return dict(self.translator.kind.layout(self.translator.config))

    def translate(self, text: str, *, beam: int = 1, max_len: int = 50, length_penalty: float = 1.0,
                  heads_off: str | None = None, rescale_heads: bool = False, src_lang: str | None = None,
                  tgt_lang: str | None = None) -> TranslationResult:
        """Translate one sentence, greedily or by beam search of width ``beam``, keeping every attention map of the
        chosen translation. ``heads_off`` switches heads off as ``--mask-heads`` does ("cross:3.*,enc:2.1": kind,
        layer and head counted from 1 as the app shows them); ``src_lang``/``tgt_lang`` choose a multilingual
        model's languages ("de", "fra_Latn") for this sentence: the result keeps the languages it was made with, and the
        next sentence takes the model's own unless it names others."""
        if not isinstance(text, str) or not text.strip():
            raise InputError("translate needs a sentence: give a non-empty string")
        if not self.translator.has_source:
            raise InputError(f"{self.name} is a language model: it continues text instead of translating it (use "
                             "attnviz generate, or model.translator.generate)")
        # the languages travel with this request: a view of the model, which stays as it is
        translator = self.translator.choosing(src_lang, tgt_lang) if src_lang or tgt_lang else self.translator
        decode = self._decoding(beam, max_len, length_penalty, heads_off, rescale_heads)
        if decode.beam == 1:
            return TranslationResult(text, translator.translate(text, decode), translator)
        from attnviz.engine.search.tree import SearchTree

        answer = SearchTree.from_events(translator.beam_steps(text, decode)).answer(translator.detokenize)
        if answer is None:  # cannot happen with a finite length limit: every beam ends
            raise InputError(f"the beam search of {text!r} finished no hypothesis; raise max_len")
        return TranslationResult(text, answer, translator)

    def _decoding(self, beam: int, max_len: int, length_penalty: float, heads_off: str | None,
                  rescale_heads: bool) -> DecodeConfig:
        from attnviz.engine.config import DecodeConfig
        from attnviz.engine.errors import ConfigError
        from attnviz.engine.heads import parse_heads

        refs = parse_heads(heads_off, self.translator.kind.layout(self.translator.config)) if heads_off else ()
        if rescale_heads and not refs:
            raise InputError("rescale_heads rescales the heads left on by heads_off; name the heads too")
        try:
            return DecodeConfig(max_len=max_len, beam=beam, length_penalty=length_penalty, heads_off=refs,
                                rescale_heads=rescale_heads)
        except ConfigError as exc:
            raise InputError(str(exc)) from None

    def methods(self) -> dict[str, str]:
        """The attribution methods defined for this model (name -> what its values mean), for
        ``TranslationResult.attribute``."""
        from attnviz.engine.attribution.base import methods_for

        return {method.name: method.description for method in methods_for(self.translator).defined}

    def heads(self, sentences: list[str], targets: list[str] | None = None, *, batch_size: int = 64
              ) -> HeadStatistics:
        """Statistics of every head over a corpus (``attnviz heads``): ``targets`` teacher-forced, or the model's own
        greedy translations when None."""
        from attnviz.engine.analysis.run import compute_head_stats

        if isinstance(sentences, str) or not sentences:
            raise InputError("heads needs a list of sentences (a corpus), not a single string or an empty list")
        if targets is not None and len(targets) != len(sentences):
            raise InputError(f"heads got {len(sentences)} sentences but {len(targets)} targets; give one each")
        return HeadStatistics(compute_head_stats(self.translator, list(sentences), targets, batch_size))

    def _repr_html_(self) -> str:
        return f"<p><b>{html.escape(self.name)}</b>: {html.escape(self.card.headline())}</p>"


def load(name: str | os.PathLike[str], dtype: str = "auto") -> Model:
    """Open a model: a bundled one by name (``attnviz.bundled()`` lists them, e.g. "de-en-multi30k"), a
    ``.safetensors`` checkpoint, a GGUF file, an imported model's folder (MarianMT, NLLB, M2M100, mBART-50, an LLM's)
    or a model the Hugging Face cache or Ollama holds by its name ("Qwen/Qwen2.5-0.5B-Instruct",
    "ollama:gemma3:270m"), running at
    ``dtype`` ("auto", "float32", "float16", "bfloat16"). A bad file is refused with a ``CheckpointError`` that
    says what is wrong."""
    from attnviz.engine.loading import load_translator

    path = resolve(name)
    return Model(path, load_translator(path, dtype))
