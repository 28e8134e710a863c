"""Benchmark: loading a big PyTorch profiler trace, against a bare typed-msgspec decode.

Run as a script (pytest ignores tests/bench)::

    python tests/bench/bench_torch_load.py [TRACE] [--reps N]

Both sides run as fresh processes, alternately, ``--reps`` times each, and the medians of their
wall times are compared:

* baseline: ``python -c`` that decompresses the file and decodes the same bytes with typed msgspec
  structs (an event struct with name, ph, cat, pid, tid, ts, dur and ``args`` kept as
  ``msgspec.Raw``, ``gc=False``): the least any loader has to do;
* kviewer: ``python -c "from kviewer.io import load; load(path)"`` with the trace cache off
  (``KVIEWER_NO_CACHE=1``), i.e. detection, decompression, decoding and every table.

The requirement is kviewer <= 2x baseline. Peak memory (ru_maxrss of each child) is reported too.
Exit status 1 when the ratio is above the limit.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
from _timing import PYC  # noqa: E402  (tests/bench is sys.path[0] when run as a script; both sides read bytecode compiled first)
DEFAULT = Path(os.environ.get("KVIEWER_SAMPLES", REPO.parent / "shared" / "samples")) / "torch" / "h200_llm_train_big.pt.trace.json.xz"
LIMIT = 2.0

BASELINE = r"""
import bz2, gzip, json, lzma, resource, sys
import msgspec

class Event(msgspec.Struct, gc=False):
    ph: str = ""
    cat: str = ""
    name: str = ""
    pid: int | str = -1
    tid: int | str = -1
    ts: int | float = 0
    dur: int | float = 0
    args: msgspec.Raw = msgspec.Raw(b"{}")

class Doc(msgspec.Struct, gc=False):
    traceEvents: list[Event] = []

path = sys.argv[1]
with open(path, "rb") as f:
    magic = f.read(6)
if magic.startswith(b"\xfd7zXZ"):
    opener = lzma.open
elif magic.startswith(b"\x1f\x8b"):
    opener = gzip.open
elif magic.startswith(b"BZh"):
    opener = bz2.open
else:
    opener = open
with opener(path, "rb") as f:
    data = f.read()
doc = msgspec.json.decode(data, type=Doc)
print(json.dumps({"events": len(doc.traceEvents), "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""

KVIEWER = r"""
import json, resource, sys
from kviewer.io import load
trace = load(sys.argv[1])
print(json.dumps({"sizes": trace.sizes(), "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def run(code: str, path: Path) -> tuple[float, float, dict]:
    """Wall time, CPU time (user + sys, all threads) and the JSON line a child prints."""
    env = dict(os.environ, KVIEWER_NO_CACHE="1", PYTHONHASHSEED="0", **PYC)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, env=env, cwd=REPO, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if out.returncode != 0:
        raise SystemExit(f"child failed ({out.returncode}):\n{out.stderr}")
    return wall, cpu, json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace", nargs="?", type=Path, default=DEFAULT)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args(argv)
    if not args.trace.exists():
        print(f"trace not found: {args.trace}", file=sys.stderr)
        return 2
    wall: dict[str, list[float]] = {"baseline": [], "kviewer": []}
    cpu: dict[str, list[float]] = {"baseline": [], "kviewer": []}
    rss: dict[str, list[int]] = {"baseline": [], "kviewer": []}
    events = 0
    info: dict = {}
    for code in (BASELINE, KVIEWER):  # unmeasured: their bytecode compiled (PYC)
        run(code, args.trace)
    for _ in range(args.reps):
        for side, code in (("baseline", BASELINE), ("kviewer", KVIEWER)):
            t, c, r = run(code, args.trace)
            wall[side].append(t)
            cpu[side].append(c)
            rss[side].append(r["maxrss_kb"])
            events = r.get("events", events)
            info = r.get("sizes", info)
    b, k = statistics.median(wall["baseline"]), statistics.median(wall["kviewer"])
    ratio = k / b
    try:
        load_avg = " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        load_avg = "?"
    print(f"trace:     {args.trace} ({args.trace.stat().st_size / 1e6:.1f} MB on disk, {events:,} events)")
    print(f"tables:    {', '.join(f'{n} {v:,}' for n, v in info.items())}")
    print(f"runs:      {args.reps} of each, alternating; python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {load_avg}")
    for side in ("baseline", "kviewer"):
        runs = ", ".join(f"{x:.2f}" for x in wall[side])
        print(
            f"{side + ':':<10} median {statistics.median(wall[side]):.3f} s wall, {statistics.median(cpu[side]):.3f} s CPU"
            f"  (runs {runs})  peak RSS {max(rss[side]) / 1024:.0f} MiB"
        )
    print(f"ratio:     {ratio:.2f}x wall  (limit {LIMIT:.1f}x)  -> {'PASS' if ratio <= LIMIT else 'FAIL'}")
    return 0 if ratio <= LIMIT else 1


if __name__ == "__main__":
    sys.exit(main())
