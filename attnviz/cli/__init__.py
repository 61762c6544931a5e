"""The ``attnviz`` command line: ``main`` builds the parser from one module per group of sub-commands (translate,
info, data, train, evaluate, analysis, convert), ``args`` holds the flags several share and ``progress`` what
long work prints on stderr; every command drives the engine's generators, and only ``gui`` opens the app."""
