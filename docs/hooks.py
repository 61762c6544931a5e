"""MkDocs hooks: the CLI reference page is written from attnviz's argparse parsers at build time (so it cannot
drift from the code), and the screenshots outside docs/ are served from where they live."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
MARKER = "<!-- cli-reference -->"
SHARED = ("resources/screenshots", "resources")  # folders of pictures the pages show, relative to the repository


def on_files(files: Files, config) -> Files:
    """Add the repository's screenshots (resources/*.png, resources/screenshots/*.png) to the site, at the same
    paths, so pages link them as ../resources/... without a second copy in docs/."""
    for folder in SHARED:
        for path in sorted((ROOT / folder).glob("*.png")):
            relative = path.relative_to(ROOT).as_posix()
            if files.get_file_from_path(relative) is None:
                files.append(File(relative, str(ROOT), config["site_dir"], config["use_directory_urls"]))
    return files


def cli_reference() -> str:
    """``attnviz.cli.reference.reference_markdown()`` of this checkout: run from its root, so its own package is
    imported even where another checkout of attnviz is installed (editable) into the environment."""
    code = "import sys; from attnviz.cli.reference import reference_markdown; sys.stdout.write(reference_markdown())"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          encoding="utf-8")
    if done.returncode != 0:
        raise RuntimeError(f"the CLI reference could not be generated:\n{done.stderr}")
    return done.stdout


def on_page_markdown(markdown: str, page, config, files) -> str:
    """Replace the marker on the CLI reference page with the parsers' own help."""
    return markdown.replace(MARKER, cli_reference()) if MARKER in markdown else markdown
