"""Finding the files of a fleet, and summarising them on Dask (or in this process).

``dask.distributed`` is imported here only, when a fleet runs: the desktop app and the other
subcommands never load it.
"""

from __future__ import annotations

import glob
import logging
import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kviewer.errors import KViewerError
from kviewer.fleet.record import FileSummary, is_url, summarize_file
from kviewer.io.folders import outside, survey

INSTALL_HINT = "kviewer fleet needs Dask: pip install 'kviewer[fleet]'"
#: error_kind of a file whose worker was lost twice (the first loss is retried)
WORKER_LOST = "WorkerLost"


class FleetError(KViewerError):
    """A fleet cannot run: no input files, a cluster that cannot be reached, Dask missing."""


@dataclass(frozen=True)
class FleetFile:
    path: str
    """a local path or an fsspec URL, as the workers will open it"""
    run: str
    """the folder holding it: the files of one folder are one run's ranks"""


# ---------------------------------------------------------------------------------------------
# finding the files


def _natural_key(name: str) -> list[Any]:
    return [int(t) if t.isdigit() else t.lower() for t in re.split(r"(\d+)", name)]


def _has_magic(s: str) -> bool:
    return any(c in s for c in "*?[")


def expand(paths: Sequence[str], notes: list[str] | None = None) -> tuple[list[FleetFile], list[str]]:
    """The files named by ``paths`` (files, folders, globs; local or fsspec URLs), in run order.

    A folder holding files is one run (its non-hidden files are the ranks); a folder holding only
    folders is a folder of runs (one level down). A file's run is its folder. Returns the files
    and the runs in the order given.

    Inside a named folder, symbolic links are followed only when they stay inside it: a link out
    of the tree is skipped, and ``notes`` (when given) gets a line saying so. A chained fsspec
    URL (``simplecache::s3://…``, ``zip://*.json::file:///x.zip``) keeps its chain in every file
    it expands to.
    """
    files: list[FleetFile] = []
    for p in paths:
        found = _expand_url(p) if is_url(p) else _expand_local(p, notes)
        if not found:
            raise FleetError(f"{p}: no such file or folder, or no files in it")
        files += found
    seen: set[str] = set()
    unique = [f for f in files if not (f.path in seen or seen.add(f.path))]  # type: ignore[func-returns-value]
    runs = list(dict.fromkeys(f.run for f in unique))
    return unique, runs


def _expand_local(p: str, notes: list[str] | None = None) -> list[FleetFile]:
    if p.startswith("file://"):
        p = p[len("file://"):]
    matches = sorted(glob.glob(p), key=_natural_key) if _has_magic(p) else ([p] if os.path.exists(p) else [])
    out: list[FleetFile] = []
    for m in matches:
        # absolute: workers of an existing cluster do not share the client's working folder
        m = os.path.abspath(m)
        if os.path.isdir(m):
            out += _folder(Path(m), notes)
        elif os.path.isfile(m) and not os.path.basename(m).startswith("."):
            out.append(FleetFile(m, os.path.dirname(m) or "."))
    return out


def _folder(folder: Path, notes: list[str] | None = None) -> list[FleetFile]:
    def files_of(d: Path) -> list[Path]:
        s = survey(d, within=folder)
        if notes is not None:
            say = (f"{d / name}: a symbolic link out of {folder} (to {target}), not followed" for name, target in s.links_out)
            notes.extend(n for n in say if n not in notes)
        return s.files

    files = files_of(folder)
    if files:
        return [FleetFile(str(f), str(folder)) for f in files]
    subs = []
    for e in os.scandir(folder):
        if e.name.startswith(".") or not e.is_dir():
            continue
        target = outside(e.path, folder)
        if target is not None:
            note = f"{e.path}: a symbolic link out of {folder} (to {target}), not followed"
            if notes is not None and note not in notes:
                notes.append(note)
            continue
        subs.append(Path(e.path))
    subs.sort(key=lambda q: _natural_key(q.name))
    return [FleetFile(str(f), str(s)) for s in subs for f in files_of(s)]


def _chain(url: str) -> tuple[str, str, str]:
    """A (chained) fsspec URL as (the segments before the one that names the path, with their
    ``::``; that segment's protocol; the segments after it, with their ``::``):
    ``simplecache::s3://b/x`` -> ("simplecache::", "s3", ""); ``zip://*.json::file:///x.zip`` ->
    ("", "zip", "::file:///x.zip")."""
    parts = url.split("::")
    for i, seg in enumerate(parts):
        if "://" in seg:
            before = "::".join(parts[:i]) + ("::" if i else "")
            after = ("::" + "::".join(parts[i + 1:])) if i + 1 < len(parts) else ""
            return before, seg.split("://", 1)[0], after
    return "", "", ""


def _expand_url(url: str) -> list[FleetFile]:
    try:
        import fsspec
    except ImportError as exc:
        raise FleetError(f"{url}: reading URLs needs fsspec: pip install fsspec") from exc
    try:
        fs, root = fsspec.core.url_to_fs(url)
    except ImportError as exc:
        # fsspec names the package the protocol needs (s3fs, gcsfs, …)
        raise FleetError(f"{url}: {exc}".replace("\n", " ")) from exc
    except ValueError as exc:
        raise FleetError(f"{url}: {exc}") from exc
    before, protocol, after = _chain(url)

    def whole(name: str) -> str:
        """The URL of ``name`` (a path of ``fs``), with the chain it was named through."""
        if not (before or after) or not protocol:
            return str(fs.unstrip_protocol(name))
        return f"{before}{protocol}://{name.split('://', 1)[-1]}{after}"

    try:
        names = sorted(fs.glob(root), key=_natural_key) if _has_magic(root) else [root]
        out: list[FleetFile] = []
        for n in names:
            if fs.isdir(n):
                entries = sorted(fs.ls(n, detail=True), key=lambda e: _natural_key(e["name"]))
                plain = [e["name"] for e in entries if e["type"] == "file" and not e["name"].rsplit("/", 1)[-1].startswith(".")]
                if plain:
                    out += [FleetFile(whole(f), whole(n)) for f in plain]
                else:
                    for d in (e["name"] for e in entries if e["type"] == "directory"):
                        out += [FleetFile(whole(f), whole(d)) for f in sorted(fs.find(d, maxdepth=1), key=_natural_key)]
            elif fs.isfile(n):
                out.append(FleetFile(whole(n), whole(n.rsplit("/", 1)[0])))
        return out
    except OSError as exc:
        raise FleetError(f"{url}: {exc}") from exc


# ---------------------------------------------------------------------------------------------
# running


Progress = Callable[[int, int, int], None]
"""(files done, files in all, files failed)"""


def summarize_here(files: Sequence[FleetFile], progress: Progress | None = None) -> list[FileSummary]:
    """Every file summarised in this process, one after the other (the reference for tests)."""
    out = []
    failed = 0
    for i, f in enumerate(files, 1):
        s = summarize_file(f.path, f.run)
        failed += not s.ok
        out.append(s)
        if progress:
            progress(i, len(files), failed)
    return out


#: seconds a local Dask cluster of worker processes takes to start here (BENCHMARKS.md, "Fleets
#: on Dask": about 2.5 s on the 2-core build machine)
CLUSTER_START_S = 2.5
#: what summarising in this process costs, about: per file (57 files/s of 21 KB gzipped traces
#: measured, ~17 ms each) and per MB on disk (the 7 MB xz of h200_llm_train_big: ~1.5 s)
HERE_PER_FILE_S = 0.018
HERE_PER_MB_S = 0.2


def choose_here(files: Sequence[FleetFile]) -> tuple[bool, str]:
    """Whether a fleet given neither ``--scheduler`` nor ``--workers`` is summarised in this
    process rather than on a local cluster, and why (one line for stderr). In this process when
    the work, estimated from the number of files and their size on disk, is under twice what the
    cluster takes to start (64 small files: about 1.2 s of work against 2.5 s of start-up; no
    Dask was 1.5x faster than one worker and 1.1x faster than two). A file whose size is unknown
    (a URL) makes the estimate unknown: the cluster, as before."""
    n = len(files)
    total = 0
    for f in files:
        if "://" in f.path:
            return False, f"{n:,} files, sizes unknown (remote): summarised on a local Dask cluster"
        try:
            total += os.stat(f.path).st_size
        except OSError:
            return False, f"{n:,} files, a size unknown: summarised on a local Dask cluster"
    mb = total / 1e6
    estimate = n * HERE_PER_FILE_S + mb * HERE_PER_MB_S
    if estimate < 2 * CLUSTER_START_S:
        return True, (f"{n:,} files, {mb:,.1f} MB: summarised in this process (about {estimate:.1f} s of work, less than "
                      f"twice the ~{CLUSTER_START_S:g} s a local Dask cluster takes to start; --workers N uses one anyway)")
    return False, (f"{n:,} files, {mb:,.1f} MB: summarised on a local Dask cluster (about {estimate:.0f} s of work in "
                   f"one process; the cluster takes ~{CLUSTER_START_S:g} s to start)")


def _import_dask() -> Any:
    try:
        import distributed
    except ImportError as exc:
        raise FleetError(INSTALL_HINT) from exc
    return distributed


#: ``LocalCluster`` options: no dashboard, and the scheduler's HTTP server (its metrics) on a free
#: port. Without a dashboard that server still takes port 8787, and a second cluster started
#: meanwhile (two fleets at once, tests in parallel) warned "Port 8787 is already in use".
NO_DASHBOARD: dict[str, Any] = {"dashboard_address": None, "scheduler_kwargs": {"dashboard_address": ":0"}}


def summarize_on_dask(files: Sequence[FleetFile], scheduler: str | None = None, workers: int | None = None,
                      progress: Progress | None = None) -> list[FileSummary]:
    """Every file summarised on Dask workers: on the cluster at ``scheduler`` (``tcp://host:port``),
    else on a local cluster of ``workers`` processes (default: one per core).

    Each task returns a :class:`FileSummary` (a file's errors are in it, never raised). A task
    that fails all the same lost its worker: it is submitted once more, and a second loss marks
    the file failed (``error_kind`` :data:`WORKER_LOST`).
    """
    distributed = _import_dask()
    import dask

    cluster = None
    if scheduler:
        try:
            client = distributed.Client(scheduler, timeout="20s")
        except (OSError, TimeoutError) as exc:
            raise FleetError(f"{scheduler}: cannot reach the Dask scheduler: {exc}") from exc
        except ValueError as exc:
            raise FleetError(f"{scheduler}: not a Dask scheduler address: {exc}") from exc
    else:
        n = workers or os.cpu_count() or 1
        # a lost worker's task fails at once (instead of being retried up to 3 times by the
        # scheduler): the client retries it once, and one file cannot kill worker after worker
        with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
            cluster = distributed.LocalCluster(n_workers=n, threads_per_worker=1, processes=True, silence_logs=logging.ERROR,
                                               **NO_DASHBOARD)
            client = distributed.Client(cluster)
    try:
        return _run(client, files, progress, distributed)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


#: at most this many files per task: small files cost less per file in batches (Dask spends a
#: few ms per task), and each worker still gets at least 8 tasks to balance the load
MAX_BATCH = 16


def summarize_batch(fn: Callable[[str, str], FileSummary], paths: Sequence[str], runs: Sequence[str]) -> list[FileSummary]:
    """One task: several files, one after the other (``fn`` is :func:`summarize_file`)."""
    return [fn(p, r) for p, r in zip(paths, runs)]


def batch_size(n_files: int, n_workers: int) -> int:
    return max(1, min(MAX_BATCH, n_files // (max(n_workers, 1) * 8)))


def _run(client: Any, files: Sequence[FleetFile], progress: Progress | None, distributed: Any) -> list[FileSummary]:
    n = len(files)
    workers = len(client.scheduler_info().get("workers", {})) or 1
    k = batch_size(n, workers)
    results: list[FileSummary | None] = [None] * n
    tasks: dict[str, tuple[list[int], int]] = {}  # key -> (file indices, failures so far)
    fn = summarize_file  # looked up now, so that a test's stand-in travels to the workers

    def submit(indices: list[int], failures: int) -> Any:
        fut = client.submit(summarize_batch, fn, [files[i].path for i in indices], [files[i].run for i in indices], pure=False)
        tasks[fut.key] = (indices, failures)
        return fut

    ac = distributed.as_completed([submit(list(range(a, min(a + k, n))), 0) for a in range(0, n, k)])
    failed = done = 0
    for fut in ac:
        indices, failures = tasks.pop(fut.key)
        if fut.status == "finished":
            summaries = fut.result()
        else:
            exc = fut.exception()
            fut.release()
            if isinstance(exc, ImportError):
                # the task itself could not start there: every file would fail the same way
                client.cancel(list(getattr(ac, "futures", ())))
                raise FleetError(f"the Dask workers cannot import {getattr(exc, 'name', None) or exc}: install kviewer (pip install 'kviewer[fleet]') on every worker")
            if failures == 0:
                # once more, each file a task of its own: a file that kills its worker takes
                # only itself down the second time
                for i in indices:
                    ac.add(submit([i], 1))
                continue
            summaries = [_lost(files[i], exc) for i in indices]
        fut.release()
        for i, s in zip(indices, summaries):
            results[i] = s
            done += 1
            failed += not s.ok
        if progress:
            progress(done, n, failed)
    return [r for r in results if r is not None]


def _lost(f: FleetFile, exc: BaseException | None) -> FileSummary:
    name = f.path.rstrip("/").rsplit("/", 1)[-1]
    return FileSummary(path=f.path, run=f.run, name=name, error_kind=WORKER_LOST,
                       error=f"{f.path}: its task failed twice, the worker lost or broken ({type(exc).__name__}: {exc})")


class TerminalFleetProgress:
    """``fleet: 120/1000 files, 2 failed, 35.1 files/s`` on stderr: redrawn in place on a
    terminal, a line every 10% otherwise."""

    def __init__(self, stream: Any = None) -> None:
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.t0 = time.monotonic()
        self.last = 0.0
        self.last_decile = -1

    def __call__(self, done: int, total: int, failed: int) -> None:
        now = time.monotonic()
        rate = done / max(now - self.t0, 1e-9)
        line = f"fleet: {done}/{total} files, {failed} failed, {rate:.1f} files/s"
        if self.tty:
            if now - self.last >= 0.1 or done == total:
                self.stream.write("\r" + line.ljust(60))
                if done == total:
                    self.stream.write("\n")
                self.stream.flush()
                self.last = now
        else:
            decile = done * 10 // max(total, 1)
            if decile != self.last_decile:
                self.last_decile = decile
                self.stream.write(line + "\n")
                self.stream.flush()
