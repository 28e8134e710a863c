"""The Details panel lists the fields the trace can fill (issue 27: an nsys kernel showed ~25 "—")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from kviewer.session.tracks import TraceTracks
from kviewer.ui.details import DetailsPanel
from kviewer.ui.viewstate import Selection, ViewState


def _rows(panel: DetailsPanel) -> dict[str, str]:
    """field -> shown value (the plain text is the title, then field and value a line each, up to
    the first empty line)."""
    lines = panel.toPlainText().splitlines()[1:]
    end = lines.index("") if "" in lines else len(lines)
    cells = lines[:end]
    return dict(zip(cells[0::2], cells[1::2]))


def test_an_nsys_kernel_shows_what_nsys_records_and_unknown_where_it_could(qtbot: Any, samples: Path) -> None:
    from kviewer.io import load

    trace = load(samples / "nsys/h200_llm_train_nvtx.sqlite")
    k = trace.kernels
    # a column nsys fills for some kernels only stays, as unknown, on a kernel without it
    k["sm_throughput_pct"] = np.where(np.arange(len(k)) == 0, 55.0, np.nan)
    state = ViewState()
    panel = DetailsPanel(state)
    qtbot.addWidget(panel)
    tracks = TraceTracks.build(trace)
    state.add_trace(tracks)
    state.set_selection(Selection(tracks.key, "kernels", 1))
    rows = _rows(panel)
    assert "grid_x" in rows and "registers" in rows and "stream" in rows
    assert not {"dram_bytes", "achieved_occupancy_pct", "flops_tensor", "mem_throughput_pct"} & set(rows)
    assert rows.get("sm_throughput_pct") == "—"
    unknown = [name for name, value in rows.items() if value == "—"]
    assert len(unknown) <= 3, unknown  # was ~25
