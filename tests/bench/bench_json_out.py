"""Benchmark: ``--format json`` through msgspec (kviewer.core.jsonout) against the stdlib path it
replaced, on the speed-of-light table of the big sample (25,680 kernels x 33 columns).

Run as a script (pytest ignores tests/bench)::

    python tests/bench/bench_json_out.py [TRACE] [--reps N] [--command]

The trace is loaded once (through the trace cache when it is warm) and its SOL table computed once;
then, interleaved, best of ``--reps``:

* stdlib: what ``write_frame(df, "json")`` did before (``to_dict(orient="records")``, a Python
  pass replacing NaN by None, ``json.dump(indent=1, default=...)``);
* msgspec: ``write_frame(df, "json")`` now (columns through ``tolist``, one msgspec encode and
  format).

Both outputs are parsed and compared (equal values; the stdlib's NaN counted as null). With
``--command``, ``kviewer sol --format json`` also runs once end to end as a subprocess (Python
start-up and the load included). The load average is printed beside the figures.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DEFAULT = Path(os.environ.get("KVIEWER_SAMPLES", REPO.parent / "shared" / "samples")) / "torch" / "h200_llm_train_big.pt.trace.json.xz"


def stdlib_json(df: Any, out: io.StringIO) -> None:
    """The JSON writer before msgspec (kviewer.cli.common.write_frame, December 2026)."""
    import numpy as np

    def default(value: Any) -> Any:
        if isinstance(value, np.integer):
            return int(value)
        if isinstance(value, np.floating):
            return None if math.isnan(value) else float(value)
        if isinstance(value, np.bool_):
            return bool(value)
        raise TypeError(type(value).__name__)

    records = df.to_dict(orient="records")
    for rec in records:
        for key, value in rec.items():
            if isinstance(value, float) and math.isnan(value):
                rec[key] = None
    json.dump(records, out, default=default, indent=1, ensure_ascii=False)
    out.write("\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("trace", nargs="?", type=Path, default=DEFAULT)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--command", action="store_true", help="also time kviewer sol --format json end to end")
    args = p.parse_args(argv)
    sys.path.insert(0, str(REPO))
    from kviewer.analysis.sol import sol_result
    from kviewer.cli.common import write_frame
    from kviewer.io import load

    t = time.perf_counter()
    trace = load(args.trace)
    df = sol_result(trace).table.rename(columns={"start": "start_ns", "dur": "dur_ns"})
    print(f"{args.trace.name}: SOL table {df.shape[0]:,} rows x {df.shape[1]} columns (load and SOL {time.perf_counter() - t:.1f} s)")

    best = {"stdlib": math.inf, "msgspec": math.inf}
    texts: dict[str, str] = {}
    for _ in range(args.reps):
        for name in best:
            out = io.StringIO()
            t = time.perf_counter()
            if name == "stdlib":
                stdlib_json(df, out)
            else:
                write_frame(df, "json", out)
            best[name] = min(best[name], time.perf_counter() - t)
            texts[name] = out.getvalue()
    load1, load5, _ = os.getloadavg()
    old, new = json.loads(texts["stdlib"]), json.loads(texts["msgspec"])
    print(f"load average {load1:.2f} / {load5:.2f} (1 / 5 min), best of {args.reps}:")
    print(f"  stdlib   {best['stdlib']:6.3f} s  {len(texts['stdlib']):,} characters")
    print(f"  msgspec  {best['msgspec']:6.3f} s  {len(texts['msgspec']):,} characters  "
          f"({best['stdlib'] / best['msgspec']:.1f}x faster; same values: {old == new}; "
          f"same text: {texts['stdlib'] == texts['msgspec']})")
    if args.command:
        t = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "kviewer", "sol", str(args.trace), "--format", "json", "-q"],
                              stdout=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(REPO)}, check=True)
        print(f"  kviewer sol --format json end to end: {time.perf_counter() - t:.1f} s (exit {proc.returncode}; "
              f"load average now {os.getloadavg()[0]:.2f})")
    return 0 if old == new else 1


if __name__ == "__main__":
    sys.exit(main())
