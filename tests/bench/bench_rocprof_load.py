"""Benchmark: the ROCm profiler loaders.

Run: ``python tests/bench/bench_rocprof_load.py [--rows N]`` (needs ../shared/samples/rocprof).

* rocprofv3 JSON (908_results.json.gz, 43,915 dispatches, 37 MB of JSON): the full load against
  baselines measured in the same run -- gzip decompression alone, an untyped ``msgspec.json``
  decode (dicts and lists: the floor of any msgspec reader) and the standard library's
  ``json.loads``.
* CSV: the real samples are small, so each is scaled to ``--rows`` rows (default 200,000) by
  repeating its data rows with shifted timestamps in a temporary file; the baseline is a plain
  ``pandas.read_csv`` of that file (type inference, no model building).
"""

from __future__ import annotations

import argparse
import gzip
import json
import tempfile
from collections.abc import Callable
from pathlib import Path

import msgspec
import pandas as pd

from kviewer.io.rocprof import v1_csv as rocprof_csv, v3_csv as rocprofv3_csv, v3_json as rocprof_json
from kviewer.io.registry import CancelToken
from _timing import best_of as _best_of  # noqa: E402  (tests/bench is sys.path[0] when run as a script)

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO.parent / "shared" / "samples" / "rocprof"


def best_of(fn: Callable[[], object]) -> float:
    return _best_of(fn, repeat=3)  # these loads are slow; 3 runs are enough


def _noop(fraction: float, message: str) -> None:
    pass


def bench_json() -> None:
    path = SAMPLES / "rocprofv3_json_tracelens" / "908_results.json.gz"
    raw = path.read_bytes()
    data = gzip.decompress(raw)
    t_gz = best_of(lambda: gzip.decompress(raw))
    t_generic = best_of(lambda: msgspec.json.decode(data))
    t_std = best_of(lambda: json.loads(data))
    t_load = best_of(lambda: rocprof_json.load(path, _noop, CancelToken()))
    n = len(rocprof_json.load(path, _noop, CancelToken()).kernels)
    print(f"rocprofv3 JSON {path.name}: {n:,} dispatches, {len(data) / 1e6:.1f} MB JSON")
    print(f"  gunzip {t_gz:.3f} s | msgspec untyped {t_generic:.3f} s | json.loads {t_std:.3f} s | kviewer load {t_load:.3f} s")
    print(f"  load / (gunzip + untyped decode) = {t_load / (t_gz + t_generic):.2f}x; load / json.loads = {t_load / t_std:.2f}x")


def scaled_csv(src: Path, rows: int, time_cols: list[str]) -> Path:
    df = pd.read_csv(src, dtype=str, keep_default_na=False)
    reps = -(-rows // len(df))
    parts = []
    span = 0
    times = {c: pd.to_numeric(df[c]) for c in time_cols if c in df}
    if times:
        span = int(max(t.max() for t in times.values()) - min(t.min() for t in times.values())) + 1000
    for r in range(reps):
        part = df.copy()
        for c, t in times.items():
            part[c] = (t + r * span).astype("int64").astype(str)
        parts.append(part)
    big = pd.concat(parts, ignore_index=True).iloc[:rows]
    if "Index" in big:
        big["Index"] = range(len(big))
    out = Path(tempfile.mkdtemp()) / src.name
    big.to_csv(out, index=False)
    return out


def bench_csv(rows: int) -> None:
    cases = [
        ("rocprof v1 results.csv", SAMPLES / "hpctraining_finite_difference" / "results.csv",
         ["DispatchNs", "BeginNs", "EndNs", "CompleteNs"], rocprof_csv.load),
        ("rocprof v1 counters, no times", SAMPLES / "hpctraining_seismic_pmc" / "data_movement.csv", [], rocprof_csv.load),
        ("rocprofv3 kernel_trace.csv", SAMPLES / "rocprofv3_2025" / "ps_file_kernel_trace.csv",
         ["Start_Timestamp", "End_Timestamp"], rocprofv3_csv.load),
    ]  # fmt: skip
    print(f"\nCSV scaled to {rows:,} rows")
    print(f"{'file':<32} {'MB':>6} {'read_csv s':>10} {'load s':>8} {'load/read_csv':>13}")
    for label, src, tcols, loader in cases:
        big = scaled_csv(src, rows, tcols)
        t_read = best_of(lambda big=big: pd.read_csv(big))
        t_load = best_of(lambda big=big, loader=loader: loader(big, _noop, CancelToken()))
        print(f"{label:<32} {big.stat().st_size / 1e6:>6.1f} {t_read:>10.3f} {t_load:>8.3f} {t_load / t_read:>13.2f}")
        big.unlink()
        big.parent.rmdir()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=200_000)
    args = ap.parse_args()
    if not SAMPLES.is_dir():
        raise SystemExit(f"samples not found at {SAMPLES}")
    bench_json()
    bench_csv(args.rows)


if __name__ == "__main__":
    main()
