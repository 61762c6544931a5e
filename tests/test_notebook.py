"""The tour notebook (docs/notebooks/tour.ipynb) runs top to bottom on the bundled model, as a reader would run it:
every cell without an error, its maps drawn as PNG and its tables as HTML, its own closing checks passing."""

from __future__ import annotations

from pathlib import Path

import nbclient
import nbformat

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "docs" / "notebooks" / "tour.ipynb"


def test_the_tour_notebook_runs_top_to_bottom():
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(notebook, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(ROOT)}}).execute()
    outputs = [out for cell in notebook.cells if cell.cell_type == "code" for out in cell.get("outputs", [])]
    assert not [out for out in outputs if out.output_type == "error"]
    shown = [out.get("data", {}) for out in outputs if out.output_type == "execute_result"]
    pictures = [data for data in shown if "image/png" in data]
    assert len(pictures) >= 4  # the cross-attention map, ALTI+, the contrastive gradients, the alignment
    assert any("<table" in data.get("text/html", "") for data in shown)  # a table: the tokens or a DataFrame
    assert "de-en-multi30k" in shown[0]["text/plain"]  # bundled() listed the models
