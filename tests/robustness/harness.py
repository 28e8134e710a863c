"""Run corpus cases through ``kviewer.io.load`` in worker processes, with limits.

Each worker is a fresh interpreter (``python harness.py``) that imports kviewer and every loader,
caps its own address space at its size after those imports plus :data:`MEM_BOUND`
(``RLIMIT_AS``), says ``ready`` and then loads one case per line it reads on stdin, answering
one JSON line per case. The parent (:func:`run`) drives a few workers from threads, one case at a
time each, so that

* a case that takes longer than the time limit is a ``hang``: its worker is killed and replaced;
* a worker that dies (a segfault, an abort) is a ``crash`` of the case it was running;
* a ``MemoryError`` -- the address-space cap reached -- is an ``oom``;
* the case's folder (every file's size, mtime and SHA-256, and the names in it) is snapshotted
  by the parent before and after the load, so a hang or a crash is checked for writes too.

Outcomes a worker reports: ``trace`` (with its warnings and table sizes), ``error`` (a typed
:class:`~kviewer.errors.LoadError`), ``loader-bug`` (an unexpected exception inside a loader that
the registry's safety net turned into a LoadError: still a bug), ``oom``, ``escaped`` (anything
else out of ``load``), ``bad-trace`` (a Trace that breaks the schema or the kernel summary).
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

#: how much a load may grow a worker's address space (``KVIEWER_FUZZ_MEM`` in MiB overrides)
MEM_BOUND = int(os.environ.get("KVIEWER_FUZZ_MEM", "2048")) * 1024**2
#: seconds one case may take (``KVIEWER_FUZZ_TIMEOUT`` overrides)
CASE_TIMEOUT = float(os.environ.get("KVIEWER_FUZZ_TIMEOUT", "30"))
#: worker processes (``KVIEWER_FUZZ_WORKERS`` overrides)
WORKERS = int(os.environ.get("KVIEWER_FUZZ_WORKERS", "2"))

REPO = Path(__file__).resolve().parents[2]

#: the registry's wording when it wraps an unexpected exception from a loader (tested in
#: test_corpus.py against kviewer.io.registry, so a change there cannot silently hide bugs here)
BUG_PREFIX = "could not be read: "
OOM_PROBLEM = "not enough memory to load this file"


# ---------------------------------------------------------------------------------------------
# snapshots (parent side)


def snapshot(root: Path) -> dict[str, tuple[int, int, str]]:
    """Every file under ``root``: relative name -> (size, mtime_ns, sha256)."""
    out: dict[str, tuple[int, int, str]] = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            p = Path(dirpath) / name
            st = p.stat()
            h = hashlib.sha256()
            with open(p, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
            out[str(p.relative_to(root))] = (st.st_size, st.st_mtime_ns, h.hexdigest())
    return out


def diff(before: dict[str, tuple[int, int, str]], after: dict[str, tuple[int, int, str]]) -> list[str]:
    """What changed between two snapshots, in words (empty when nothing did)."""
    changes = [f"created {n}" for n in sorted(after.keys() - before.keys())]
    changes += [f"removed {n}" for n in sorted(before.keys() - after.keys())]
    for n in sorted(before.keys() & after.keys()):
        b, a = before[n], after[n]
        if b[2] != a[2]:
            changes.append(f"content of {n} changed")
        elif b[:2] != a[:2]:
            changes.append(f"size/mtime of {n} changed")
    return changes


# ---------------------------------------------------------------------------------------------
# the worker


def _vm_size() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize")


def _rss_peak() -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _reset_peak() -> int | None:
    """Reset the peak-RSS mark (Linux clear_refs 5) and return the current RSS."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _check_trace(trace: Any) -> str:
    """'' when the trace is sound, else what is wrong with it."""
    import numpy as np

    from kviewer.analysis.summary import kernel_summary
    from kviewer.core.diagnostics import KINDS, Diagnostic

    try:
        trace.validate()
        k = trace.kernels
        if len(k):
            start = k["start"].to_numpy()
            if (np.diff(start) < 0).any():
                return "kernels not sorted by start"
            if not (k["id"].to_numpy() == np.arange(len(k))).all():
                return "kernel ids are not 0..n-1"
        kernel_summary(trace)
        trace.span_ns()
        if not all(isinstance(w, Diagnostic) and w.kind in KINDS and w.message for w in trace.meta.warnings):
            return "a warning that is not a diagnostic of a known kind with a message"
    except Exception as exc:  # noqa: BLE001 - anything here is a finding, reported as such
        return f"{type(exc).__name__}: {exc}"[:300]
    return ""


def _short_tb(exc: BaseException) -> str:
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if "kviewer" in f.filename] or frames
    return " <- ".join(f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in reversed(ours[-4:]))


def run_one(path: str) -> dict[str, Any]:
    """Load one case in this process and describe the outcome."""
    import gc
    import math
    import warnings

    from kviewer.errors import LoadCancelled, LoadError
    from kviewer.io import load

    bad_progress: list[str] = []

    def progress(fraction: float, message: str) -> None:
        if not (isinstance(fraction, (int, float)) and math.isfinite(fraction) and -1e-9 <= fraction <= 1 + 1e-9):
            bad_progress.append(f"fraction {fraction!r}")
        if not isinstance(message, str):
            bad_progress.append(f"message {message!r}")

    rss0 = _reset_peak()
    t0 = time.perf_counter()
    res: dict[str, Any] = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            trace = load(path, progress=progress, use_cache=False)
        except MemoryError as exc:
            res = {"outcome": "oom", "type": type(exc).__name__, "message": str(exc)[:300]}
        except LoadCancelled as exc:
            res = {"outcome": "escaped", "type": type(exc).__name__, "message": str(exc)[:300]}
        except LoadError as exc:
            cause = exc.__cause__
            problem = exc.problem
            if type(exc) is LoadError and problem == OOM_PROBLEM:
                outcome = "oom"
            elif type(exc) is LoadError and problem.startswith(BUG_PREFIX) and not isinstance(cause, LoadError):
                outcome = "loader-bug"
            else:
                outcome = "error"
            res = {
                "outcome": outcome,
                "type": type(exc).__name__,
                "message": str(exc)[:600],
                "names_file": path in str(exc) and bool(problem.strip()),
                "recognised": exc.recognised or "",
            }
            if outcome == "loader-bug" and cause is not None:
                res["where"] = _short_tb(cause)
        except BaseException as exc:  # noqa: BLE001 - the finding this harness exists for
            res = {"outcome": "escaped", "type": type(exc).__name__, "message": str(exc)[:300], "where": _short_tb(exc)}
        else:
            problem = _check_trace(trace)
            res = {
                "outcome": "bad-trace" if problem else "trace",
                "problem": problem,
                "format": trace.meta.source_format,
                "kernels": len(trace.kernels),
                "sizes": trace.sizes(),
                "warnings": [f"{w.kind}: {w.message[:300]}" for w in trace.meta.warnings[:5]],
                "n_warnings": len(trace.meta.warnings),
            }
            del trace
    res["seconds"] = round(time.perf_counter() - t0, 4)
    peak = _rss_peak()
    res["rss_growth"] = (peak - rss0) if peak is not None and rss0 is not None else None
    res["py_warnings"] = sorted({f"{w.category.__name__}: {str(w.message)[:120]}" for w in caught})[:5]
    if bad_progress:
        res["bad_progress"] = bad_progress[:3]
    gc.collect()
    return res


def worker_main() -> None:
    import resource

    os.environ["KVIEWER_NO_CACHE"] = "1"
    from kviewer.io import registry

    registry.loaders()
    try:  # the Nsight Compute reader loads a native library on first use: count it in the base
        import ncu_report  # noqa: F401
    except ImportError:
        pass
    import kviewer.analysis.summary  # noqa: F401

    limit = _vm_size() + MEM_BOUND
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    print(json.dumps({"ready": True, "limit": limit}), flush=True)
    for line in sys.stdin:
        case = json.loads(line)
        res = run_one(case["path"])
        res["id"] = case["id"]
        print(json.dumps(res), flush=True)


# ---------------------------------------------------------------------------------------------
# the parent


class Worker:
    """One worker process and a thread that forwards its stdout lines to a queue."""

    def __init__(self) -> None:
        env = dict(os.environ)
        env["KVIEWER_NO_CACHE"] = "1"
        env["MALLOC_ARENA_MAX"] = "2"  # per-thread malloc arenas would eat the address-space cap
        env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
        self.err = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close(), outlives this call
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve())],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err,
            cwd=tempfile.gettempdir(), env=env, text=True, bufsize=1,
        )  # fmt: skip
        self.lines: queue.Queue[str | None] = queue.Queue()
        self._pump_thread = threading.Thread(target=self._pump, daemon=True)
        self._pump_thread.start()
        first = self.lines.get(timeout=120)
        if first is None or not json.loads(first).get("ready"):
            raise RuntimeError(f"corpus worker did not start: {self.stderr_tail()}")

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def stderr_tail(self) -> str:
        self.err.seek(0)
        return self.err.read()[-800:].decode("utf-8", errors="replace")

    def run(self, case: dict[str, Any], timeout: float) -> dict[str, Any]:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(case) + "\n")
            self.proc.stdin.flush()
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            self.kill()
            return {"id": case["id"], "outcome": "hang", "message": f"no answer within {timeout:.0f} s"}
        except (BrokenPipeError, OSError):
            line = None
        if line is None:
            code = self.proc.wait()
            return {"id": case["id"], "outcome": "crash", "message": f"worker exited with {code}: {self.stderr_tail()}"}
        return json.loads(line)

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()

    def close(self) -> None:
        """End the worker (politely: stdin closed) and release its pipes."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.close()
        except OSError:  # the worker is already gone
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()
        self._pump_thread.join(timeout=10)
        self.proc.stdout.close()
        self.err.close()


def run(
    cases: Iterable[dict[str, Any]],
    workers: int = WORKERS,
    timeout: float = CASE_TIMEOUT,
    on_result: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Load every case (dicts with ``id`` and ``path``) in ``workers`` worker processes.

    Returns one result per case (in the order of ``cases``), each with ``modified`` -- the list of
    changes the load made to the case's folder (empty when none).
    """
    todo: queue.Queue[dict[str, Any]] = queue.Queue()
    items = list(cases)
    for c in items:
        todo.put(c)
    results: dict[int, dict[str, Any]] = {}
    lock = threading.Lock()
    failures: list[BaseException] = []

    def drive() -> None:
        w: Worker | None = None
        try:
            while True:
                try:
                    case = todo.get_nowait()
                except queue.Empty:
                    break
                p = Path(case["path"])
                root = p if p.is_dir() else p.parent
                before = snapshot(root)
                if w is not None and not w.alive:
                    w.close()
                if w is None or not w.alive:
                    w = Worker()
                res = w.run({"id": case["id"], "path": case["path"]}, timeout)
                res["modified"] = diff(before, snapshot(root))
                with lock:
                    results[case["id"]] = res
                if on_result is not None:
                    on_result(res)
        except BaseException as exc:  # noqa: BLE001 - reported by the caller
            failures.append(exc)
        finally:
            if w is not None:
                w.close()

    threads = [threading.Thread(target=drive) for _ in range(max(1, workers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        raise failures[0]
    return [results[c["id"]] for c in items]


# ---------------------------------------------------------------------------------------------
# judging


#: outcomes that are findings whatever the case
BAD_OUTCOMES = ("hang", "crash", "escaped", "oom", "loader-bug", "bad-trace")
#: damage that must not change what loads: the same content under another name or container
SAME_AS_BASE = ("rename", "gzip-members", "sqlite-wal")


def _same_warnings(r: dict[str, Any], base: dict[str, Any], names: tuple[str, str] = ("", "")) -> bool:
    """No warning beyond the intact file's (a file's own name in a warning does not count)."""

    def norm(ws: list[str], name: str) -> set[str]:
        return {w.replace(name, "<file>") if name else w for w in ws}

    return r.get("n_warnings", 0) <= base.get("n_warnings", 0) and norm(r.get("warnings", []), names[0]) <= norm(
        base.get("warnings", []), names[1]
    )


def judge(cases: list[Any], results: list[dict[str, Any]]) -> list[str]:
    """Every finding, one line each (empty when the corpus passes).

    A case passes when it loads (completely, or partially with a warning) or fails with a typed
    :class:`~kviewer.errors.LoadError` naming the file, within the time and memory limits,
    without a Python warning, a bad progress value or a change to its folder. Besides:

    * a truncated file (cut anywhere but right after a newline, where a shorter file is valid)
      that loads fewer kernels than the intact file must say so in a warning;
    * the same content renamed, split into gzip members or switched to SQLite WAL mode loads
      exactly as the intact file does (formats are detected by content).
    """
    by_id = {r["id"]: r for r in results}
    case_by_id = {c.id: c for c in cases}
    out: list[str] = []
    for c in cases:
        r = by_id[c.id]
        what = f"#{c.id} {c.source or '(synthetic)'} [{c.family}: {c.detail}]"
        o = r["outcome"]
        if o in BAD_OUTCOMES:
            out.append(f"{what}: {o}: {r.get('type', '')} {r.get('message') or r.get('problem', '')} {r.get('where', '')}".rstrip())
        if r.get("modified"):
            out.append(f"{what}: the load changed its folder: {r['modified']}")
        if o == "error" and not r.get("names_file"):
            out.append(f"{what}: the error does not name the file: {r.get('message')}")
        if r.get("py_warnings"):
            out.append(f"{what}: Python warnings during the load: {r['py_warnings']}")
        if r.get("bad_progress"):
            out.append(f"{what}: progress out of range: {r['bad_progress']}")
        base = by_id.get(c.base) if c.base is not None else None
        if base is None or base["outcome"] not in ("trace", "error"):
            continue
        cut = c.cut and not c.line_end_cut
        if cut and o == "trace" and base["outcome"] == "trace" and r["kernels"] < base["kernels"] and _same_warnings(r, base):
            out.append(f"{what}: a silent partial load: {r['kernels']} of {base['kernels']} kernels and no warning")
        if c.family in SAME_AS_BASE:
            if o != base["outcome"]:
                out.append(f"{what}: {o} where the intact file gives {base['outcome']}: {r.get('message', '')}")
            elif o == "trace" and (r["format"], r["kernels"]) != (base["format"], base["kernels"]):
                out.append(f"{what}: {r['format']}/{r['kernels']} kernels where the intact file gives {base['format']}/{base['kernels']}")
            elif o == "trace" and not _same_warnings(r, base, (Path(c.path).name, Path(case_by_id[c.base].path).name)):
                out.append(f"{what}: new warnings {r.get('warnings')}")
            elif o == "error" and r.get("type") != base.get("type"):
                out.append(f"{what}: {r.get('type')} where the intact file gives {base.get('type')}")
    return out


def fmt_of(c: Any, by_id: dict[int, dict[str, Any]]) -> str:
    """What a case's source is: the loader of its intact copy, or why it has none."""
    if c.family.startswith("folder"):
        return "(folders)"
    base_id = c.id if c.family == "original" else c.base
    base = by_id.get(base_id) if base_id is not None else None
    if base is None:
        return "(synthetic)"
    if base["outcome"] == "trace":
        return str(base["format"])
    if base.get("type") == "UnsupportedFormat":
        return "(not a trace)"
    return f"(refused: {base.get('recognised') or base.get('type')})"


def summary(cases: list[Any], results: list[dict[str, Any]], seconds: float | None = None) -> str:
    """A table of cases per format and outcome, and the slowest and hungriest cases."""
    from collections import Counter, defaultdict

    by_id = {r["id"]: r for r in results}
    table: dict[str, Counter[str]] = defaultdict(Counter)
    for c in cases:
        r = by_id[c.id]
        o = r["outcome"]
        label = "complete" if o == "trace" and not r.get("n_warnings") else "partial+warning" if o == "trace" else (
            f"error:{r.get('type')}" if o == "error" else o)  # fmt: skip
        table[fmt_of(c, by_id)][label] += 1
    labels = sorted({k for t in table.values() for k in t})
    head = ["format", "cases", *labels]
    rows = [[f, str(sum(t.values())), *[str(t.get(k, 0) or "") for k in labels]] for f, t in sorted(table.items())]
    rows.append(["total", str(len(cases)), *[str(sum(t.get(k, 0) for t in table.values()) or "") for k in labels]])
    widths = [max(len(x[i]) for x in [head, *rows]) for i in range(len(head))]
    lines = ["  ".join(x[i].rjust(widths[i]) if i else x[i].ljust(widths[i]) for i in range(len(head))) for x in [head, *rows]]
    fams = Counter(c.family for c in cases)
    lines.append("damage: " + ", ".join(f"{k} {v}" for k, v in sorted(fams.items())))
    timed = [r for r in results if r.get("seconds") is not None]
    if timed:
        slow = max(timed, key=lambda r: r["seconds"])
        lines.append(f"slowest case #{slow['id']}: {slow['seconds']:.2f} s; total load time {sum(r['seconds'] for r in timed):.1f} s"
                     + (f" in {seconds:.1f} s wall" if seconds is not None else ""))  # fmt: skip
    grown = [r for r in results if r.get("rss_growth") is not None]
    if grown:
        big = max(grown, key=lambda r: r["rss_growth"])
        lines.append(f"largest peak-RSS growth of a load: {big['rss_growth'] / 1024**2:.0f} MiB (#{big['id']}); "
                     f"bound: address space +{MEM_BOUND / 1024**2:.0f} MiB, {CASE_TIMEOUT:.0f} s per case")  # fmt: skip
    return "\n".join(lines)


if __name__ == "__main__":
    worker_main()
