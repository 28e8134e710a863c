"""Benchmark: loading Nsight Compute reports and ncu CSVs.

Run: ``python tests/bench/bench_ncu_load.py`` (the samples in ../shared/samples/ncu).

The baseline, measured in the same run, is the floor any ``.ncu-rep`` reader pays through
NVIDIA's ``ncu_report`` module: open the report and read every metric of every kernel once
(``metric_by_name`` + the typed value getter), no units, no tables. For a CSV the floor is
``pandas.read_csv`` of the file as strings. The figure that matters is load / floor.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from kviewer.io.ncu import csv_export as ncu_csv
from kviewer.io.ncu import report as ncu_rep
from kviewer.io.registry import CancelToken
from _timing import best_of  # noqa: E402  (tests/bench is sys.path[0] when run as a script)

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared" / "samples" / "ncu"


def rep_floor(path: Path) -> int:
    import ncu_report

    ctx = ncu_report.load_report(str(path))
    n = 0
    for ri in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(ri)
        for ai in range(rng.num_actions()):
            action = rng.action_by_idx(ai)
            for name in action.metric_names():
                m = action.metric_by_name(name)
                k = m.kind()
                if k in (3, 4):
                    m.as_double()
                elif k in (5, 6):
                    m.as_uint64()
                elif k == 2:
                    m.as_string()
                n += 1
    return n


def csv_floor(path: Path) -> int:
    lines = [x for x in path.read_text().splitlines() if x.startswith('"')]
    from io import StringIO

    return int(pd.read_csv(StringIO("\n".join(lines)), dtype=str, keep_default_na=False).size)


def main(argv: list[str]) -> None:
    paths = [Path(a) for a in argv] or sorted(p for p in SHARED.iterdir() if p.suffix in (".ncu-rep", ".csv", ".log"))
    print(f"{'file':<36} {'MB':>6} {'metrics':>8} {'floor s':>8} {'load s':>8} {'load/floor':>10}")
    for path in paths:
        is_rep = path.suffix == ".ncu-rep"
        module = ncu_rep if is_rep else ncu_csv
        floor_fn = rep_floor if is_rep else csv_floor
        count = floor_fn(path)
        floor = best_of(lambda: floor_fn(path))
        load = best_of(lambda: module.load(path, lambda f, m: None, CancelToken()))
        trace = module.load(path, lambda f, m: None, CancelToken())
        print(
            f"{path.name:<36} {path.stat().st_size / 1e6:>6.2f} {len(trace.metrics):>8,} {floor:>8.3f} "
            f"{load:>8.3f} {load / floor:>9.1f}x   ({count:,} values in the floor)"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
