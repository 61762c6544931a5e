"""The colour of each guessed language (``engine.text.token_language``), shared by the exported figures
(``plots.lens_languages``) and the Translate tab's logit-lens strip; no matplotlib, so the window opens without it.
Okabe and Ito's colour-blind-safe palette, with "unknown" a light grey, so what was not judged recedes."""

LANGUAGE_COLOURS = {"en": "#0072B2", "de": "#E69F00", "fr": "#009E73", "other": "#CC79A7", "unknown": "#D9D9D9"}
