#!/usr/bin/env bash
# Build the standalone app (dist/attnviz/) from a checkout and prove it works with its offscreen self-test.
#   scripts/build_app.sh            uses (or creates) .venv and installs the build extra into it
#   VENV=/path scripts/build_app.sh uses another virtual environment
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VENV:-.venv}"
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/pip" install -q -e ".[build]"
start=$(date +%s)
"$VENV/bin/pyinstaller" --noconfirm --clean --log-level WARN build_app.spec
echo "build: $(( $(date +%s) - start )) s, bundle $(du -sh dist/attnviz | cut -f1) in dist/attnviz/"
QT_QPA_PLATFORM=offscreen dist/attnviz/attnviz --self-test
