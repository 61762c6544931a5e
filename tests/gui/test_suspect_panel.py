"""The Analysis tab's suspect-translations page: Rank fills a table sorted by the combined score with every
component as a column (the engine's figures), Cancel stops, the rows copy as text, the table exports as CSV and
JSON with every digit, and double-clicking a row hands its source to the Translate tab."""

from __future__ import annotations

import csv
import json
import math

import pytest
from PySide6.QtCore import Qt

from attnviz.engine.attribution.suspect.components import COMPONENTS
from attnviz.engine.attribution.suspect.corpus import suspect_steps
from attnviz.engine.attribution.suspect.rank import SuspectRanking
from attnviz.gui.widgets import copy_rows


def test_rank_fills_the_table_most_suspect_first(qtbot, loaded, suspect_corpus, trained_translator, tmp_path):
    tab = loaded.analysis_tab
    panel = tab.suspect
    tab.pages.setCurrentWidget(panel)
    tab.set_files(*suspect_corpus)
    panel.compute()
    assert panel.cancel_button.isEnabled() and not panel.rank_button.isEnabled()
    qtbot.waitUntil(lambda: not panel.is_running() and panel.ranking is not None, timeout=60000)
    sources = open(suspect_corpus[0]).read().split("\n")[:5]
    expected = [e for e in suspect_steps(trained_translator, sources) if isinstance(e, SuspectRanking)][0]
    model = panel.table.model()
    titles = [model.headerData(c, Qt.Orientation.Horizontal) for c in range(model.columnCount())]
    assert titles[:4] == ["#", "line", "combined", "verdict"] and titles[-3:] == ["source", "output", "reference"]
    assert {"Attn-ign-SRC", "Wass-to-Unif", "ALTI+ source", "log-prob / token", "sink mass", "log-prob"} <= set(titles)
    assert model.rowCount() == 5
    combined = [r["combined"] for r in panel.model.records if not r["verdict"].startswith("suspect")]
    assert combined == sorted(combined, reverse=True)  # flagged rows first, then the rest by score
    for row, want in zip(panel.model.records, expected.records(), strict=True):
        assert row["line"] == want["line"] and row["output"] == want["output"]
        for name in COMPONENTS:
            assert row[name] == pytest.approx(want[name], abs=1e-5)
    first = model.index(0, titles.index("Wass-to-Unif"))
    assert model.data(first) == f"{panel.model.records[0]['wass_to_unif']:.6g}"
    assert model.data(first, Qt.ItemDataRole.ToolTipRole) == repr(panel.model.records[0]["wass_to_unif"])
    assert "not calibrated: combined = the suspicion percentile of log-prob per token" in panel.summary.text()
    assert "Not calibrated (not calibrated): the verdict reads log-prob / token alone" in panel.summary.toolTip()
    top = panel.model.records[0]
    assert f"line {top['line']}" in panel.detail.text() and top["output"] in panel.detail.text()  # row 0 selected
    text = copy_rows(panel.table, everything=True).splitlines()
    assert text[0].split("\t")[:3] == ["#", "line", "combined"] and len(text) == 6
    assert panel.export_button.isEnabled()
    panel.save_file(str(tmp_path / "r.csv"))
    rows = list(csv.DictReader(open(tmp_path / "r.csv", encoding="utf-8")))
    assert [int(r["line"]) for r in rows] == [r["line"] for r in panel.model.records]
    assert float(rows[0]["wass_to_unif"]) == panel.model.records[0]["wass_to_unif"]  # every digit
    panel.save_file(str(tmp_path / "r.json"))
    data = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert data["rows"][0]["combined"] == panel.model.records[0]["combined"] and "percentile" in data["how"]
    assert data["calibration"] is None and data["rows"][0]["verdict"] == panel.model.records[0]["verdict"]
    assert not any(isinstance(v, float) and math.isnan(v) for r in data["rows"] for v in r.values())
    with qtbot.waitSignal(tab.open_sentence, timeout=2000) as opened:
        panel.table.doubleClicked.emit(panel.proxy.index(0, 0))
    assert opened.args == [panel.model.records[0]["source"]]


def test_cancel_keeps_nothing(qtbot, loaded, suspect_corpus):
    tab = loaded.analysis_tab
    panel = tab.suspect
    tab.pages.setCurrentWidget(panel)
    tab.set_files(*suspect_corpus)
    panel.compute()
    panel.cancel()
    qtbot.waitUntil(lambda: not panel.is_running(), timeout=30000)
    assert panel.ranking is None and panel.model.rowCount() == 0 and panel.rank_button.isEnabled()
    assert "Cancelled" in panel.summary.text() and not panel.export_button.isEnabled()
