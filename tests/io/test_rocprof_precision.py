"""rocprof counter CSVs whose timestamps lost their precision (re-saved by a spreadsheet as
8.1097E+14): detected, kernels laid end to end as for counter-only files, and a warning. The file
is a real rocprof v1 counter CSV (omniperf2022_mi200/SQ_LEVEL_WAVES.csv) with its BeginNs / EndNs /
DispatchNs / CompleteNs rewritten as a spreadsheet writes them (%.4E)."""

from __future__ import annotations

import csv
from pathlib import Path

from kviewer.io import load


def test_precision_lost_timestamps(samples: Path, tmp_path: Path) -> None:
    src = samples / "rocprof" / "omniperf2022_mi200" / "SQ_LEVEL_WAVES.csv"
    with src.open(newline="") as f:
        rows = list(csv.reader(f))
    head, body = rows[0], rows[1:]
    cols = [head.index(c) for c in ("DispatchNs", "BeginNs", "EndNs", "CompleteNs")]
    for r in body:
        for c in cols:
            r[c] = f"{float(r[c]):.4E}"
    out = tmp_path / "SQ_LEVEL_WAVES.csv"
    with out.open("w", newline="") as f:
        csv.writer(f).writerows([head, *body])
    original, damaged = load(src), load(out)
    assert not original.kernels["serialised"].any()
    k = damaged.kernels
    assert len(k) == len(body) == len(original.kernels)
    assert k["serialised"].all() and (k["dur"] > 0).all()
    assert (k["start"].to_numpy()[1:] >= k["end"].to_numpy()[:-1]).all()  # end to end
    assert any(d.kind == "damaged" and "precision" in d.message for d in damaged.meta.warnings)
    assert any(d.kind == "serialised" for d in damaged.meta.warnings)
