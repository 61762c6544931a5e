"""The ``attnviz`` command line: one module per group of sub-commands, all driving the engine's generators."""
