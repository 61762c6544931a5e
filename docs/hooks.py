"""MkDocs hooks: the CLI reference page is written from attnviz's argparse parsers at build time (so it cannot
drift from the code), the screenshots outside docs/ are served from where they live, and the tour notebook is
run and rendered as a page of the site (``notebooks/tour.md``: its text, its code and what each cell shows)."""

from __future__ import annotations

import base64
import html
import subprocess
import sys
from pathlib import Path

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
MARKER = "<!-- cli-reference -->"
SHARED = ("resources/screenshots", "resources")  # folders of pictures the pages show, relative to the repository
NOTEBOOK = "notebooks/tour.ipynb"  # under docs/: rendered as notebooks/tour.md
NOTEBOOK_TIMEOUT_S = 120


def on_files(files: Files, config) -> Files:
    """Add the repository's screenshots (resources/*.png, resources/screenshots/*.png) to the site, at the same
    paths, so pages link them as ../resources/... without a second copy in docs/."""
    for folder in SHARED:
        for path in sorted((ROOT / folder).glob("*.png")):
            relative = path.relative_to(ROOT).as_posix()
            if files.get_file_from_path(relative) is None:
                files.append(File(relative, str(ROOT), config["site_dir"], config["use_directory_urls"]))
    files.append(File.generated(config, NOTEBOOK.replace(".ipynb", ".md"), content=notebook_page()))
    return files


def notebook_page() -> str:
    """The tour notebook, run top to bottom from the repository's root (as tests/test_notebook.py runs it), as
    Markdown: its text cells as they are, each code cell as Python, and under it what the cell showed (a picture,
    a table, text)."""
    import nbclient
    import nbformat

    path = Path(__file__).parent / NOTEBOOK
    notebook = nbformat.read(path, as_version=4)
    nbclient.NotebookClient(notebook, timeout=NOTEBOOK_TIMEOUT_S, kernel_name="python3",
                            resources={"metadata": {"path": str(ROOT)}}).execute()
    parts = ["<!-- rendered from docs/notebooks/tour.ipynb by docs/hooks.py at build time; edit the notebook -->",
             "[Download the notebook](tour.ipynb) and run it yourself ([how](../python-api.md#the-tour-notebook))."]
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            parts.append(cell.source)
        elif cell.cell_type == "code":
            parts.append(f"```python\n{cell.source}\n```")
            parts += [shown for out in cell.get("outputs", []) if (shown := _output(out))]
    return "\n\n".join(parts) + "\n"


def _output(out) -> str:
    """What one output of a code cell shows, as Markdown (a PNG inline, HTML as it is, text in a block)."""
    if out.output_type == "stream":
        return f"```text\n{out.text.rstrip()}\n```"
    if out.output_type == "error":
        raise RuntimeError(f"the tour notebook failed: {out.ename}: {out.evalue}")
    data = out.get("data", {})
    if "image/png" in data:
        png = data["image/png"].replace("\n", "")
        base64.b64decode(png, validate=True)  # a picture, not text that would break the page
        return f'<img alt="a cell\'s picture" src="data:image/png;base64,{png}">'
    if "text/html" in data:
        return f'<div class="notebook-output">{data["text/html"]}</div>'
    if "text/plain" in data:
        return f"```text\n{html.unescape(data['text/plain']).rstrip()}\n```"
    return ""


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
