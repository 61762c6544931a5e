"""The Python API for notebooks and scripts: open a model, translate a sentence, and ask the translation what the
app shows, each answer a typed object that turns into numpy (``to_numpy()``) or pandas (``to_pandas()``, where a
table fits; pandas is optional) and draws itself in Jupyter with the same drawing as the app's exports::

    import attnviz

    model = attnviz.load("de-en-multi30k")                  # a bundled model, a .safetensors file or a model folder
    result = model.translate("Ein Hund läuft über die Wiese.")
    result.text                                             # 'A dog runs through the grassy field.'
    result.attention("cross", layer=-1)                     # AttentionMap: the last layer, mean of heads
    result.attention("encoder", layer=0, head=3).to_numpy() # [S, S], every row sums to 1
    result.attribute("alti-plus")                           # AttributionMap: output tokens x (source, prefix)
    result.align().pharaoh()                                # '0-0 1-1 ...': word alignment from cross-attention
    result.heads().to_pandas()                              # every head's statistics on this sentence
    model.heads(sentences)                                  # ... or over a corpus

Layers and heads count from 0 here, as Python does; the app and the command line number them from 1 (and so does
``heads_off``, which reads the command line's ``--mask-heads`` text). This package wraps the engine
(``attnviz.engine``) without repeating it: ``Model.translator`` and each result's engine object are there for
what it does not wrap. Bad input is refused with an ``InputError`` (a ``ValueError``) and a bad model file with a
``CheckpointError``, each saying what was wrong and what to do (both are ``AttnvizError``). Importing it loads
neither torch nor Qt; torch comes with the first model loaded.
"""

from __future__ import annotations

from attnviz.api.maps import AttentionMap, AttributionMap, Heatmap
from attnviz.api.model import Model, bundled, load
from attnviz.api.results import TranslationResult
from attnviz.api.tables import HeadStatistics, WordAlignment
from attnviz.engine.errors import AttnvizError, CheckpointError, InputError

__all__ = ["AttentionMap", "AttributionMap", "AttnvizError", "CheckpointError", "HeadStatistics", "Heatmap",
           "InputError", "Model", "TranslationResult", "WordAlignment", "bundled", "load"]
