"""``python -m attnviz``: the same entry point as the ``attnviz`` command (and the PyInstaller entry)."""

import sys

from attnviz.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
