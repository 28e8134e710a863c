"""Build large PyTorch (Kineto) traces from a real one, for benchmarks.

Two shapes:

* ``ranks``: N per-rank files of one distributed run, each the source trace (optionally tiled in
  time), with ``distributedInfo`` {backend, rank, world_size} set, its own host pid, and
  optionally one slower rank (its timeline stretched) to act as a straggler;
* ``tile``: one trace with the source's events repeated ``--tile`` times back to back in time
  (``h200_llm_train_big`` x 20 = 10 million events).

Tiling shifts ``ts`` by the source's span per copy and offsets every id that links events
(flow ``id``, ``correlation``, ``External id``, python ids), so the copies do not alias, and
renumbers ``ProfilerStep#N`` / ``step_N`` so every step stays distinct. Metadata events
(``ph`` M / i) are written once.

Generated files are written where you say (the benchmarks use a temporary or cache folder) and
must never be committed. Usage::

    python tests/bench/gen_large.py ranks SRC OUT_DIR --ranks 8 [--tile K] [--slow-rank R --slow-factor 1.1]
    python tests/bench/gen_large.py tile SRC OUT.json --tile 20
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, BinaryIO

import msgspec

from kviewer.io.source import read_content

#: args that hold ids linking events; offset per tile so that copies stay apart
ID_ARGS = ("correlation", "External id", "Python id", "Python parent id", "Ev Idx", "Sequence number", "Fwd thread id")
_STEP_NAME = re.compile(r"^(ProfilerStep#|step_)(\d+)$")

DEFAULT_SRC = Path(os.environ.get("KVIEWER_SAMPLES", Path(__file__).resolve().parents[3] / "shared" / "samples")) / "torch" / "h200_llm_train_big.pt.trace.json.xz"


def bench_dir() -> Path:
    """Where generated traces go: ``$KVIEWER_BENCH_DIR``, else ``$XDG_CACHE_HOME/kviewer-bench``
    (never the repository)."""
    env = os.environ.get("KVIEWER_BENCH_DIR")
    if env:
        return Path(env)
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "kviewer-bench"


def read_doc(src: Path) -> dict[str, Any]:
    content = read_content(src)
    if content.truncated:
        raise SystemExit(f"{src}: the compressed stream is cut; use a complete trace")
    doc = msgspec.json.decode(content.data)
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise SystemExit(f"{src}: not a Kineto trace (no traceEvents list)")
    return doc


class Tiler:
    """Shifts of one source trace: time span, id ranges and step count, measured once."""

    def __init__(self, events: list[dict[str, Any]], gap_us: float = 1000.0) -> None:
        self.events = events
        lo = float("inf")
        hi = float("-inf")
        id_max: dict[str, int] = {k: 0 for k in ID_ARGS}
        flow_max = 0
        step_max = -1
        for ev in events:
            ts = ev.get("ts")
            if isinstance(ts, (int, float)):
                lo = min(lo, ts)
                hi = max(hi, ts + (ev.get("dur") or 0))
            fid = ev.get("id")
            if isinstance(fid, int):
                flow_max = max(flow_max, fid)
            args = ev.get("args")
            if isinstance(args, dict):
                for k in ID_ARGS:
                    v = args.get(k)
                    if isinstance(v, int) and v > id_max[k]:
                        id_max[k] = v
            name = ev.get("name")
            if isinstance(name, str):
                m = _STEP_NAME.match(name)
                if m:
                    step_max = max(step_max, int(m.group(2)))
        self.host_pids = {ev["pid"] for ev in events if ev.get("cat") in _HOST_CATS and isinstance(ev.get("pid"), int)}
        self.t0 = lo
        self.span_us = (hi - lo) + gap_us
        self.id_step = {k: v + 1 for k, v in id_max.items()}
        self.flow_step = flow_max + 1
        self.step_count = step_max + 1
        # metadata is written once; everything with a time is tiled
        self.tiled = [ev for ev in events if ev.get("ph") not in ("M", "i")]
        self.once = [ev for ev in events if ev.get("ph") in ("M", "i")]

    def copies(self, n: int, pid_offset: int = 0, stretch: float = 1.0) -> Iterable[bytes]:
        """Encoded event lists (comma-separated JSON objects, no brackets), one chunk per copy."""
        enc = msgspec.json.Encoder()
        for i in range(n):
            out = []
            shift = i * self.span_us * stretch
            for ev in self.events if i == 0 else self.tiled:
                e = dict(ev)
                ts = e.get("ts")
                if isinstance(ts, (int, float)):
                    e["ts"] = round(self.t0 + (ts - self.t0) * stretch + shift, 3)
                    if stretch != 1.0 and isinstance(e.get("dur"), (int, float)):
                        e["dur"] = round(e["dur"] * stretch, 3)
                if pid_offset and e.get("pid") in self.host_pids:
                    e["pid"] = e["pid"] + pid_offset
                if i:
                    if isinstance(e.get("id"), int):
                        e["id"] += i * self.flow_step
                    args = e.get("args")
                    if isinstance(args, dict):
                        changed = None
                        for k in ID_ARGS:
                            v = args.get(k)
                            if isinstance(v, int) and v >= 0:
                                changed = changed or dict(args)
                                changed[k] = v + i * self.id_step[k]
                        if changed is not None:
                            e["args"] = changed
                    name = e.get("name")
                    if isinstance(name, str) and name[:1] in ("P", "s"):
                        m = _STEP_NAME.match(name)
                        if m:
                            e["name"] = f"{m.group(1)}{int(m.group(2)) + i * self.step_count}"
                out.append(e)
            chunk = enc.encode(out)
            yield chunk[1:-1]  # strip the list brackets


#: categories recorded on the host: their pid is a process id (a GPU event's pid is a device)
_HOST_CATS = {"cpu_op", "python_function", "cuda_runtime", "cuda_driver", "user_annotation", "Operator", "Runtime"}


def _open_out(path: Path, compress: str) -> BinaryIO:
    path.parent.mkdir(parents=True, exist_ok=True)
    if compress == "gzip":
        return gzip.open(path, "wb", compresslevel=1)  # type: ignore[return-value]
    return open(path, "wb")


def write_trace(path: Path, header: dict[str, Any], chunks: Iterable[bytes], compress: str = "none") -> int:
    """Write ``{header..., "traceEvents": [chunks]}``; returns the bytes written (uncompressed)."""
    total = 0
    with _open_out(path, compress) as f:
        head = msgspec.json.encode(header)
        start = head[:-1] + (b', "traceEvents": [' if len(header) else b'"traceEvents": [')
        f.write(start)
        total += len(start)
        first = True
        for chunk in chunks:
            if not chunk:
                continue
            if not first:
                f.write(b",\n")
                total += 2
            f.write(chunk)
            total += len(chunk)
            first = False
        f.write(b"]}\n")
        total += 3
    return total


def _header(doc: dict[str, Any], distributed: dict[str, Any] | None) -> dict[str, Any]:
    header: dict[str, Any] = {}
    if distributed is not None:
        header["distributedInfo"] = distributed  # Kineto writes it among the first keys
    for k, v in doc.items():
        if k not in ("traceEvents", "distributedInfo"):
            header[k] = v
    return header


def make_ranks(
    src: Path,
    out_dir: Path,
    ranks: int,
    tile: int = 1,
    slow_rank: int | None = None,
    slow_factor: float = 1.0,
    compress: str = "none",
    doc: dict[str, Any] | None = None,
) -> list[Path]:
    """Write ``rank-R.pt.trace.json[.gz]`` for R in 0..ranks-1; returns the paths."""
    doc = doc or read_doc(src)
    tiler = Tiler(doc["traceEvents"])
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    suffix = ".pt.trace.json" + (".gz" if compress == "gzip" else "")
    for r in range(ranks):
        header = _header(doc, {"backend": "nccl", "rank": r, "world_size": ranks})
        stretch = slow_factor if slow_rank == r else 1.0
        path = out_dir / f"rank-{r}{suffix}"
        write_trace(path, header, tiler.copies(tile, pid_offset=r * 100, stretch=stretch), compress)
        paths.append(path)
    return paths


def make_tiled(src: Path, out: Path, tile: int, compress: str = "none", doc: dict[str, Any] | None = None) -> tuple[Path, int]:
    """Write one trace with the source tiled ``tile`` times in time; returns (path, event count)."""
    doc = doc or read_doc(src)
    tiler = Tiler(doc["traceEvents"])
    write_trace(out, _header(doc, doc.get("distributedInfo")), tiler.copies(tile), compress)
    return out, len(tiler.events) + (tile - 1) * len(tiler.tiled)


def cached(out: Path, params: dict[str, Any], build: Any) -> Any:
    """Run ``build()`` unless ``out`` (a file or a folder) exists and was built with the same
    parameters; the parameters are kept beside it (never inside a folder of traces)."""
    stamp = out.with_name(out.name + ".params.json")
    if out.exists() and stamp.exists():
        try:
            if json.loads(stamp.read_text()) == params:
                return None
        except ValueError:
            pass
    result = build()
    stamp.write_text(json.dumps(params))
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("ranks", help="N per-rank files with distributedInfo")
    r.add_argument("src", type=Path, nargs="?", default=DEFAULT_SRC)
    r.add_argument("out", type=Path, nargs="?", default=bench_dir() / "ranks")
    r.add_argument("--ranks", type=int, default=8)
    r.add_argument("--tile", type=int, default=1)
    r.add_argument("--slow-rank", type=int, default=None)
    r.add_argument("--slow-factor", type=float, default=1.0)
    r.add_argument("--compress", choices=("none", "gzip"), default="none")
    t = sub.add_parser("tile", help="one trace tiled in time")
    t.add_argument("src", type=Path, nargs="?", default=DEFAULT_SRC)
    t.add_argument("out", type=Path, nargs="?", default=bench_dir() / "train_big_x20.pt.trace.json")
    t.add_argument("--tile", type=int, default=20)
    t.add_argument("--compress", choices=("none", "gzip"), default="none")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    if args.cmd == "ranks":
        paths = make_ranks(args.src, args.out, args.ranks, args.tile, args.slow_rank, args.slow_factor, args.compress)
        size = sum(x.stat().st_size for x in paths)
        print(f"wrote {len(paths)} rank files, {size / 1e6:.0f} MB, to {args.out} in {time.perf_counter() - t0:.1f} s")
    else:
        path, n = make_tiled(args.src, args.out, args.tile, args.compress)
        print(f"wrote {n:,} events, {path.stat().st_size / 1e6:.0f} MB, to {path} in {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
