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
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
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


def run(code: str, path: Path) -> tuple[float, dict]:
    env = dict(os.environ, KVIEWER_NO_CACHE="1", PYTHONHASHSEED="0")
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, env=env, cwd=REPO, check=False)
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise SystemExit(f"child failed ({out.returncode}):\n{out.stderr}")
    return wall, json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace", nargs="?", type=Path, default=DEFAULT)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args(argv)
    if not args.trace.exists():
        print(f"trace not found: {args.trace}", file=sys.stderr)
        return 2
    base_t: list[float] = []
    kv_t: list[float] = []
    base_rss: list[int] = []
    kv_rss: list[int] = []
    info: dict = {}
    for _ in range(args.reps):
        t, r = run(BASELINE, args.trace)
        base_t.append(t)
        base_rss.append(r["maxrss_kb"])
        events = r["events"]
        t, r = run(KVIEWER, args.trace)
        kv_t.append(t)
        kv_rss.append(r["maxrss_kb"])
        info = r["sizes"]
    b, k = statistics.median(base_t), statistics.median(kv_t)
    ratio = k / b
    print(f"trace:     {args.trace} ({args.trace.stat().st_size / 1e6:.1f} MB on disk, {events:,} events)")
    print(f"tables:    {', '.join(f'{n} {v:,}' for n, v in info.items())}")
    print(f"runs:      {args.reps} of each, alternating; python {sys.version.split()[0]}")
    print(f"baseline:  median {b:.3f} s  (runs {', '.join(f'{x:.2f}' for x in base_t)})  peak RSS {max(base_rss) / 1024:.0f} MiB")
    print(f"kviewer:   median {k:.3f} s  (runs {', '.join(f'{x:.2f}' for x in kv_t)})  peak RSS {max(kv_rss) / 1024:.0f} MiB")
    print(f"ratio:     {ratio:.2f}x  (limit {LIMIT:.1f}x)  -> {'PASS' if ratio <= LIMIT else 'FAIL'}")
    return 0 if ratio <= LIMIT else 1


if __name__ == "__main__":
    sys.exit(main())
