"""A folder of per-rank traces (one file per distributed rank) as one Trace with a rank dimension.

A distributed PyTorch job writes one Kineto trace per rank (``rank-0.json``, ``rank-1.json``, …,
or whatever ``tensorboard_trace_handler`` names them). Opening the folder loads every file the
registry recognises, in parallel worker *processes* (JSON parsing holds the GIL, so threads would
not help), and merges them into one trace:

* the rank of each file comes from the trace itself (``meta.ranks``, filled by the loader from
  Kineto's ``distributedInfo``), else from ``distributedInfo`` in the file's head, else from a
  ``rank-N`` / ``rank_N`` file name, else from the order of the files;
* every row gets that rank in its ``rank`` column, so views group tracks by rank;
* times are shifted onto the earliest rank's origin (each rank's trace is relative to its own);
* devices are renumbered to be unique in the merged trace (``devices.rank`` says whose they are);
* ids are renumbered after sorting, and flows / metrics follow their rows.

Workers send back their trace as compact column blobs (:func:`kviewer.io.cache.codec.encode_trace`,
uncompressed): numpy bytes and category lists pickle far faster than DataFrames of objects.
"""

from __future__ import annotations

import collections
import concurrent.futures as cf
import logging
import mmap
import multiprocessing
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from kviewer import io as kio
from kviewer.core import Diagnostic, Trace, TraceMeta, make_table
from kviewer.errors import KViewerError, LoadCancelled, LoadError, NotOneRun, TruncatedTrace, UnsupportedFormat
from kviewer.io.folders import MAX_RANK_FILES, Survey, describe, survey
from kviewer.io.graphs import link_graphs
from kviewer.io.registry import CancelToken, LoaderSpec, detect
from kviewer.io.source import Progress, private_tmpdir, read_head, track_temp_dir, untrack_temp_dir

if TYPE_CHECKING:
    import kviewer.io.cache.codec

log = logging.getLogger(__name__)

LABEL = "folder of per-rank traces"
#: a folder with more files than this is not sniffed file by file (it is not a run's ranks)
MAX_FILES = MAX_RANK_FILES
#: worker processes: env KVIEWER_RANK_WORKERS (1 = load in this process), default the CPU count
ENV_WORKERS = "KVIEWER_RANK_WORKERS"

_RANK_IN_NAME = re.compile(r"(?:^|[^a-z0-9])rank[-_ ]?(\d+)(?![0-9])", re.IGNORECASE)


# ---------------------------------------------------------------------------------------------
# finding the rank files


def candidate_files(folder: Path) -> list[Path]:
    """Regular, readable, non-hidden files of a folder (not recursive), in natural name order
    (symlink loops, FIFOs, devices and the like are skipped: :func:`kviewer.io.folders.survey`)."""
    return survey(folder).files


#: formats written once per process of a distributed job, so that a folder of them is one run's
#: ranks (PyTorch traces; Nsight Systems exports of ``nsys profile -o report_%q{RANK}``). A
#: folder of other outputs (a rocprof results folder, say) is not taken for ranks.
RANK_FORMATS = ("torch", "nsys")


def _member_spec(path: Path) -> LoaderSpec | None:
    return _member(path)[0]


def _member(path: Path) -> tuple[LoaderSpec | None, str, bool]:
    """The loader of a rank file, or None, why it is not one and whether it could be read at all
    (False: unreadable; True: read, but not a rank trace)."""
    try:
        spec = detect(path)
    except UnsupportedFormat:
        return None, "not a trace kviewer reads", True
    except LoadError as exc:
        return None, exc.problem, False  # unreadable: said as such, not taken for another format
    except OSError as exc:
        return None, f"cannot be read ({exc.strerror or exc})", False
    if spec.name in RANK_FORMATS and not spec.directories:
        return spec, "", True
    return None, f"a {spec.label}", True


def sniff(head: bytes, path: Path) -> bool:
    """A folder holding at least one PyTorch trace or Nsight Systems export (see RANK_FORMATS)."""
    if not path.is_dir():
        return False
    try:
        files = candidate_files(path)
    except OSError:
        return False
    if len(files) > MAX_FILES:
        return False
    return any(_member_spec(f) is not None for f in files)


def rank_from_name(name: str) -> int | None:
    """``rank-3.…``, ``…_rank_3.json`` → 3."""
    m = _RANK_IN_NAME.search(name)
    return int(m.group(1)) if m else None


_NUMBER = re.compile(rb"\s*:\s*(-?\d+)\s*[,}]")


def rank_from_head(head: bytes) -> int | None:
    """``distributedInfo.rank`` of a Kineto trace, read from the head of the file.

    Kineto writes ``distributedInfo`` among the first keys, so this needs no full parse. The
    object may not fit in the head (a big job's ``pg_config`` lists every rank), so its top-level
    keys are scanned rather than the object decoded.
    """
    at = head.find(b'"distributedInfo"')
    if at < 0:
        return None
    brace = head.find(b"{", at)
    if brace < 0 or head[at + len(b'"distributedInfo"') : brace].strip() != b":":
        return None
    depth = 0
    i = brace
    n = len(head)
    while i < n:
        c = head[i]
        if c == 0x22:  # a string: find its end, honouring escapes
            j = i + 1
            while j < n and head[j] != 0x22:
                j += 2 if head[j] == 0x5C else 1
            if j >= n:
                return None
            if depth == 1 and head[i + 1 : j] == b"rank":
                m = _NUMBER.match(head, j + 1)
                if m:
                    rank = int(m.group(1))
                    return rank if rank >= 0 else None
                return None
            i = j + 1
            continue
        if c in (0x7B, 0x5B):
            depth += 1
        elif c in (0x7D, 0x5D):
            depth -= 1
            if depth == 0:
                return None
        i += 1
    return None


# ---------------------------------------------------------------------------------------------
# loading one rank (in a worker process)


@dataclass
class MemberResult:
    path: str
    encoded: Any = None
    """:class:`kviewer.io.cache.codec.EncodedTrace` from a worker, the Trace itself from this process"""
    error: str = ""
    truncated: bool = False
    """the error was a :class:`~kviewer.errors.TruncatedTrace` (a file cut short, or still being written)"""
    cancelled: bool = False
    spill: str = ""
    """the file holding the blobs' bytes, when the worker wrote them to ``spill_dir``"""


def load_member(path: str, encode: bool = True, cancel: CancelToken | None = None, spill_dir: str = "") -> MemberResult:
    """Load one rank file and return it as column blobs (runs in a worker process), or as the
    Trace itself with ``encode=False`` (in this process).

    With ``spill_dir`` the blobs' bytes go to a file there and only their lengths travel back:
    the result message stays small, so the parent's executor thread hands this worker its next
    file at once instead of first unpickling ~100 MB (while holding the GIL against the parent's
    own parsing), and the parent maps the file instead of copying it.

    Errors come back as text: a LoadError's custom ``__init__`` does not survive pickling.
    """
    try:
        trace = kio.registry.load(path, cancel=cancel, use_cache=False)  # the merged folder is what gets cached
        if not encode:
            return MemberResult(path, encoded=trace)
        enc = kio.cache.codec.encode_trace(trace, compress=False)
        del trace
        if not spill_dir:
            return MemberResult(path, encoded=enc)
        fd, spill = tempfile.mkstemp(suffix=".blobs", dir=spill_dir)
        with os.fdopen(fd, "wb") as f:
            for blob in enc.columns:
                f.write(blob.data)
                blob.data = len(blob.data)  # type: ignore[assignment]  # restored by _unspill
        return MemberResult(path, encoded=enc, spill=spill)
    except LoadCancelled:
        return MemberResult(path, cancelled=True)
    except KViewerError as exc:
        return MemberResult(path, error=str(exc), truncated=isinstance(exc, TruncatedTrace))
    except Exception as exc:  # noqa: BLE001 - reported to the parent as one line
        return MemberResult(path, error=f"{path}: {type(exc).__name__}: {exc}")


def _unspill(result: MemberResult) -> Any:
    """The worker's blobs, their bytes as views of the spill file mapped read-only."""
    enc = result.encoded
    with open(result.spill, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        # MAP_POPULATE maps every page in one call: touching them one by one during the merge
        # costs a page fault each (on a VM, as much as the copy the mapping avoids)
        populate = getattr(mmap, "MAP_POPULATE", 0)
        mm: mmap.mmap | None
        if size and populate:
            mm = mmap.mmap(f.fileno(), 0, flags=mmap.MAP_SHARED | populate, prot=mmap.PROT_READ)
        else:
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else None
    try:
        os.unlink(result.spill)  # the mapping keeps the bytes until the last view is gone
    except OSError:
        pass  # (Windows) removed with the spill folder
    view = memoryview(mm) if mm is not None else memoryview(b"")
    at = 0
    for blob in enc.columns:
        n = int(blob.data)
        blob.data = view[at : at + n]
        at += n
    if at != size:
        raise ValueError(f"spill file of {result.path} holds {size} bytes, expected {at}")
    return enc


def worker_count(n_files: int) -> int:
    env = os.environ.get(ENV_WORKERS, "").strip()
    if env.isdigit() and int(env) > 0:
        wanted = int(env)
    else:
        wanted = os.cpu_count() or 1
    return max(1, min(wanted, n_files))


def _load_all(paths: Sequence[Path], progress: Progress, cancel: CancelToken, workers: int) -> list[MemberResult]:
    """Load every rank file: ``workers - 1`` spawned processes plus this one, all taking the next
    file from one queue (this process would only wait otherwise, and the files it parses itself
    need no transfer)."""
    n = len(paths)
    results: dict[str, MemberResult] = {}
    todo = collections.deque(str(p) for p in paths)
    lock = threading.Lock()

    def next_path() -> str | None:
        with lock:
            return todo.popleft() if todo else None

    def here(path: str) -> None:
        cancel.check()
        results[path] = load_member(path, encode=False, cancel=cancel)
        cancel.check()
        progress(0.9 * len(results) / n, f"{len(results)} of {n} rank files")

    if workers <= 1:
        while (path := next_path()) is not None:
            here(path)
        return [results[str(p)] for p in paths]
    # spawn: safe with threads in the parent (the GUI loads off its main thread) and on every OS
    pool = cf.ProcessPoolExecutor(max_workers=workers - 1, mp_context=multiprocessing.get_context("spawn"))
    shm = Path("/dev/shm")
    in_shm = shm.is_dir() and os.access(shm, os.W_OK)
    spill_dir = tempfile.mkdtemp(prefix="kviewer-ranks-", dir=shm if in_shm else private_tmpdir())
    track_temp_dir(spill_dir)  # removed on SIGTERM too
    futures: dict[cf.Future[MemberResult], str] = {}

    def submit_next(_done: cf.Future[MemberResult] | None = None) -> None:
        # a worker that finished takes the next file (runs on the executor's thread)
        if _done is not None and (_done.cancelled() or _done.exception() is not None):
            return
        path = next_path()
        if path is None:
            return
        try:
            fut = pool.submit(load_member, path, True, None, spill_dir)
        except RuntimeError:  # shut down or broken: this process will load it
            with lock:
                todo.appendleft(path)
            return
        with lock:
            futures[fut] = path
        fut.add_done_callback(submit_next)

    def collect() -> None:
        with lock:
            done = [(f, p) for f, p in futures.items() if f.done() and p not in results]
        for fut, path in done:
            result = fut.result()  # BrokenProcessPool when a worker died
            if result.spill:
                result.encoded = _unspill(result)
            results[path] = result
        if done:
            progress(0.9 * len(results) / n, f"{len(results)} of {n} rank files")

    try:
        progress(0.0, f"loading {n} rank files in {workers} processes")
        for _ in range(workers - 1):
            submit_next()
        while (path := next_path()) is not None:
            here(path)
            collect()
        while len(results) < n:
            with lock:
                pending = [f for f, p in futures.items() if p not in results]
            if pending:
                cf.wait(pending, timeout=0.1, return_when=cf.FIRST_COMPLETED)
            else:
                time.sleep(0.01)  # a callback is between taking a file and submitting it
            collect()
            cancel.check()
            if not pending and (path := next_path()) is not None:
                here(path)
    except cf.process.BrokenProcessPool as exc:
        # a worker could not start or died (e.g. a parent run from stdin cannot spawn, or the
        # OS killed a worker for memory): finish the remaining files in this process
        log.warning("rank worker processes failed (%s); loading the remaining rank files in this process", exc)
        _stop(pool)
        for p in paths:
            if str(p) not in results:
                here(str(p))
        return [results[str(p)] for p in paths]
    except BaseException:
        # cancelled (or interrupted): stop the workers we started instead of letting them finish
        _stop(pool)
        raise
    finally:
        shutil.rmtree(spill_dir, ignore_errors=True)
        untrack_temp_dir(spill_dir)
    # every file is in; the idle workers exit on their own (joining them would wait for the
    # interpreter teardown of each)
    pool.shutdown(wait=False)
    return [results[str(p)] for p in paths]


def _stop(pool: cf.ProcessPoolExecutor) -> None:
    for proc in list((getattr(pool, "_processes", None) or {}).values()):
        proc.terminate()
    pool.shutdown(wait=False, cancel_futures=True)


# ---------------------------------------------------------------------------------------------
# merging


def _concat(frames: list[pd.DataFrame], table: str) -> pd.DataFrame:
    """Concatenate tables of one schema; categories are unioned (pd.concat would make objects)."""
    if len(frames) == 1:
        return frames[0].reset_index(drop=True)
    columns = list(frames[0].columns)
    data: dict[str, Any] = {}
    for col in columns:
        parts = [f[col] for f in frames]
        if isinstance(parts[0].dtype, pd.CategoricalDtype):
            arrays = [p.array for p in parts]
            if len({a.categories.dtype for a in arrays}) > 1:
                # one loader's categories are str, another's object: union_categoricals refuses
                arrays = [pd.Categorical.from_codes(a.codes, categories=a.categories.astype(object)) for a in arrays]
            data[col] = pd.api.types.union_categoricals(arrays)
        elif all(isinstance(p.dtype, np.dtype) and p.dtype == parts[0].dtype for p in parts):
            data[col] = np.concatenate([p.to_numpy() for p in parts])
        else:
            data[col] = pd.concat(parts, ignore_index=True)
    return pd.DataFrame(data, columns=columns)


def _gather(parts: list[Any], perm: np.ndarray, scratch: dict[np.dtype[Any], np.ndarray] | None = None) -> Any:
    """One column of the merged table: the parts concatenated, then taken in merged order.

    (A gather is about twice as fast as scattering each part into place.) The concatenation goes
    into a ``scratch`` buffer reused from column to column: fresh memory costs a page fault per
    page, and on a VM that is as slow as the copy itself. Categories are unioned
    in order of first appearance, as ``union_categoricals`` does, and the codes recoded, so a
    name never becomes one Python object per row.
    """
    dtype = getattr(parts[0], "dtype", None)
    if isinstance(dtype, pd.CategoricalDtype):
        cats = [p.cat.categories for p in parts]
        if all(c.equals(cats[0]) for c in cats[1:]):
            union = cats[0]
            recoded = [p.cat.codes.to_numpy() for p in parts]
        else:
            inverse, union_values = pd.factorize(np.concatenate([c.to_numpy(dtype=object) for c in cats]))
            union = pd.Index(union_values, dtype=cats[0].dtype)
            recoded = []
            at = 0
            for p, c in zip(parts, cats):
                lut = np.append(inverse[at : at + len(c)], -1)  # code -1 (missing) stays -1
                at += len(c)
                recoded.append(lut[p.cat.codes.to_numpy()])
        codes = np.concatenate(recoded).take(perm)
        small = np.int8 if len(union) < 2**7 else np.int16 if len(union) < 2**15 else np.int32
        return pd.Categorical.from_codes(codes.astype(small, copy=False), dtype=pd.CategoricalDtype(union, ordered=dtype.ordered), validate=False)
    if all(isinstance(p, np.ndarray) and p.dtype != object and p.dtype == parts[0].dtype for p in parts):
        n = len(perm)
        if scratch is None:
            return np.concatenate(parts).take(perm)
        buf = scratch.get(parts[0].dtype)
        if buf is None or len(buf) < n:
            buf = scratch[parts[0].dtype] = np.empty(n, dtype=parts[0].dtype)
        np.concatenate(parts, out=buf[:n])
        return buf[:n].take(perm)
    # anything else (text columns)
    series = pd.concat([p if isinstance(p, pd.Series) else pd.Series(p) for p in parts], ignore_index=True)
    return series.take(perm).reset_index(drop=True)


def _assign_ranks(paths: Sequence[Path], traces: Sequence[Trace], heads: Sequence[bytes]) -> tuple[list[int], list[str]]:
    """One distinct rank per file, and warnings about how it was decided."""
    return decide_ranks([rank_in_trace(t, h) for t, h in zip(traces, heads)], [p.name for p in paths])


def rank_in_trace(trace: Trace, head: bytes) -> int | None:
    """The rank a loaded file says it is: ``meta.ranks`` when it names one, else ``distributedInfo``
    in the file's head."""
    return trace.meta.ranks[0] if len(trace.meta.ranks) == 1 else rank_from_head(head)


def decide_ranks(from_trace: Sequence[int | None], names: Sequence[str]) -> tuple[list[int], list[str]]:
    """One distinct rank per file of a run, from what each file says (:func:`rank_in_trace`), else
    from the file names, else the files' order; and warnings about how it was decided.

    (The one rule for the app's folder loading and ``kviewer fleet``.)
    """
    warnings: list[str] = []
    if all(r is not None for r in from_trace) and len(set(from_trace)) == len(from_trace):
        return [int(r) for r in from_trace if r is not None], warnings
    if any(r is not None for r in from_trace):
        if len({r for r in from_trace if r is not None}) < sum(r is not None for r in from_trace):
            warnings.append("several files claim the same rank in distributedInfo; ranks are taken from the file names")
        else:
            warnings.append("not every file has a rank in distributedInfo; ranks are taken from the file names")
    from_name = [rank_from_name(n) for n in names]
    if all(r is not None for r in from_name) and len(set(from_name)) == len(from_name):
        return [int(r) for r in from_name if r is not None], warnings
    warnings.append("ranks could not be told from the files or their names; they are numbered in file-name order")
    return list(range(len(names))), warnings


#: rank files whose recorded times lie further apart than this are not one run's ranks (the
#: ranks of a job run at the same time; their profilers start within seconds of each other)
RUN_GAP_NS = 10 * 60 * 10**9


def one_run(folder: Path, paths: Sequence[Path], traces: Sequence[Trace], label: str = LABEL) -> None:
    """Check that a folder's loaded trace files can be one run's ranks; :class:`NotOneRun` (with
    the reason as data) when they cannot.

    Decided on data: the profiled programs (:attr:`TraceMeta.program`, where the files say) must
    be one; the recorded times (each file's events on the wall clock, where its origin is known)
    must overlap or lie within :data:`RUN_GAP_NS` of each other. Different hosts alone are no
    reason (a multi-node job's ranks run on several)."""
    if len(traces) < 2:
        return
    programs: dict[str, list[str]] = {}
    for p, t in zip(paths, traces):
        programs.setdefault(t.meta.program, []).append(str(p))
    if "" not in programs and len(programs) > 1:
        what = ", ".join(f"{name} ({len(files)} file{'s' if len(files) != 1 else ''})" for name, files in programs.items())
        raise NotOneRun(folder, f"its files are not one run's ranks: they profiled different programs ({what}); "
                        "open them one by one to see them side by side", label, reason="programs", groups=list(programs.values()))
    spans = []
    for p, t in zip(paths, traces):
        span = t.span_ns()
        if t.meta.origin_ns is None or span is None:
            return  # a file without a wall clock cannot be placed: nothing to tell them apart by
        spans.append((t.meta.origin_ns + span[0], t.meta.origin_ns + span[1], str(p), t.meta.host))
    spans.sort()
    groups: list[list[tuple[int, int, str, str]]] = [[spans[0]]]
    end = spans[0][1]
    for s in spans[1:]:
        if s[0] - end > RUN_GAP_NS:
            groups.append([])
        groups[-1].append(s)
        end = max(end, s[1])
    if len(groups) == 1:
        return
    a, b = groups[0], groups[1]
    last = max(a, key=lambda x: x[1])
    gap_s = (b[0][0] - last[1]) / 1e9
    hosts = sorted({x[3] for x in spans if x[3]})
    hours = f" ({gap_s / 3600:,.1f} h)" if gap_s >= 3600 else ""
    on = f" on {len(hosts)} hosts ({', '.join(hosts)})" if len(hosts) > 1 else ""
    raise NotOneRun(
        folder,
        f"its files are not one run's ranks: they were recorded {gap_s:,.0f} s{hours} apart{on} "
        f"({os.path.basename(last[2])} ends before {os.path.basename(b[0][2])} starts); open them one by one to see them side by side",
        label, reason="times", groups=[[x[2] for x in g] for g in groups],
    )


def merge_ranks(folder: Path, paths: Sequence[Path], traces: Sequence[Trace], ranks: Sequence[int], label: str) -> Trace:
    """Merge per-rank traces (each relative to its own origin) into one trace."""
    order = sorted(range(len(traces)), key=lambda i: ranks[i])
    traces = [traces[i] for i in order]
    paths = [paths[i] for i in order]
    ranks = [ranks[i] for i in order]
    warnings: list[Diagnostic] = []
    origins = [t.meta.origin_ns for t in traces]
    if all(o is not None for o in origins):
        known = [int(o) for o in origins if o is not None]
        origin: int | None = min(known)
        shifts = [o - min(known) for o in known]
    else:
        origin = next((o for o in origins if o is not None), None)
        shifts = [0] * len(traces)
        if len(traces) > 1:
            warnings.append(
                Diagnostic.warning("time_origin", folder, "not every rank's trace has an absolute time origin; the ranks' timelines may not line up")
            )

    # devices: renumber so that an id names one device of one rank
    device_maps: list[dict[int, int]] = []
    next_id = 0
    dev_frames = []
    for t, r in zip(traces, ranks):
        mapping: dict[int, int] = {}
        ids = [int(x) for x in t.devices["id"].to_numpy()] if len(t.devices) else []
        used = set(ids)
        for tbl in ("kernels", "gpu_ops"):
            used.update(int(x) for x in np.unique(t.table(tbl)["device"].to_numpy()) if x >= 0)
        for old in sorted(used):
            mapping[old] = next_id
            next_id += 1
        device_maps.append(mapping)
        d = t.devices.copy()
        # a device the events name but the file does not describe still gets a row: its ordinal
        # (the GPU it ran on) is what the window calls it, whatever id the merge gave it
        missing = sorted(set(mapping) - set(ids))
        if missing:
            d = pd.concat([d, make_table("devices", len(missing), {"id": np.array(missing, dtype=np.int32)})], ignore_index=True)
            ids = ids + missing
        if len(d):
            d["ordinal"] = np.array(ids, dtype=np.int32)
            d["id"] = np.array([mapping[i] for i in ids], dtype=d["id"].to_numpy().dtype)
            d["rank"] = np.asarray(r, dtype=d["rank"].to_numpy().dtype)
        dev_frames.append(d)

    def remap_devices(values: np.ndarray, mapping: dict[int, int]) -> np.ndarray:
        if not mapping or not len(values):
            return values
        # by binary search, not a table indexed by id: a huge device id in a file must not
        # make the merge allocate gigabytes
        keys = np.array(sorted(mapping), dtype=np.int64)
        new = np.array([mapping[k] for k in keys.tolist()], dtype=np.int64)
        pos = np.minimum(np.searchsorted(keys, values), len(keys) - 1)
        found = (keys[pos] == values) & (values >= 0)
        return np.where(found, new[pos], -1).astype(values.dtype, copy=False)

    merged: dict[str, pd.DataFrame] = {}
    new_ids: dict[str, list[np.ndarray]] = {}
    # columns are gathered on a few threads (numpy's take runs without the GIL, and on a VM much
    # of its time is page faults of the fresh output, which the kernel handles in parallel); each
    # thread reuses its own scratch buffers for the concatenation
    local = threading.local()

    def gather(parts: list[Any], perm: np.ndarray) -> Any:
        if not hasattr(local, "scratch"):
            local.scratch = {}
        return _gather(parts, perm, local.scratch)

    pool = cf.ThreadPoolExecutor(max_workers=max(1, min(4, os.cpu_count() or 1)), thread_name_prefix="kviewer-merge")
    try:
        for name in ("kernels", "gpu_ops", "cpu_slices"):
            frames = [t.table(name) for t in traces]
            sizes = [len(f) for f in frames]
            n = sum(sizes)
            # the merged order: by start over all ranks, stable (rank order breaks ties). Each
            # rank is sorted already, so the sort only merges runs.
            starts = np.concatenate([f["start"].to_numpy() + shift for f, shift in zip(frames, shifts)]) if n else np.zeros(0, np.int64)
            perm = np.argsort(starts, kind="stable")
            new_id = np.empty(n, dtype=np.int64)
            new_id[perm] = np.arange(n, dtype=np.int64)
            offsets = np.cumsum([0, *sizes])
            # per-rank old id -> merged id (ids are row positions in every input table)
            new_ids[name] = [new_id[offsets[i] : offsets[i + 1]] for i in range(len(frames))]

            def values(col: str, i: int, frames: list[pd.DataFrame] = frames) -> Any:
                f = frames[i]
                if col in ("start", "end") and shifts[i]:
                    return f[col].to_numpy() + shifts[i]
                if col == "rank":
                    return np.full(len(f), ranks[i], dtype=f[col].dtype)
                if col == "device":
                    return remap_devices(f[col].to_numpy(), device_maps[i])
                column = f[col]
                return column.to_numpy() if isinstance(column.dtype, np.dtype) and column.dtype != object else column

            data: dict[str, Any] = {}
            jobs = {col: pool.submit(gather, [values(col, i) for i in range(len(frames))], perm) for col in frames[0].columns if col != "id"}
            for col in frames[0].columns:
                data[col] = np.arange(n, dtype=np.int64) if col == "id" else jobs[col].result()
            # copy=False: the columns are fresh arrays; consolidating them into blocks would copy again
            merged[name] = pd.DataFrame(data, columns=list(frames[0].columns), copy=False)
    finally:
        pool.shutdown(wait=True)

    def follow(old: np.ndarray, lookup: np.ndarray) -> np.ndarray:
        out = np.full(len(old), -1, dtype=np.int64)
        ok = (old >= 0) & (old < len(lookup))
        out[ok] = lookup[old[ok]]
        return out

    flow_frames = []
    metric_frames = []
    for i, t in enumerate(traces):
        f = t.flows.copy()
        if len(f):
            f["src"] = follow(f["src"].to_numpy(), new_ids["cpu_slices"][i])
            dst = f["dst"].to_numpy()
            kinds = f["dst_table"].astype(str).to_numpy()
            new_dst = np.full(len(f), -1, dtype=np.int64)
            for tbl in ("kernels", "gpu_ops"):
                sel = kinds == tbl
                new_dst[sel] = follow(dst[sel], new_ids[tbl][i])
            f["dst"] = new_dst
        flow_frames.append(f)
        m = t.metrics.copy()
        if len(m):
            m["kernel"] = follow(m["kernel"].to_numpy(), new_ids["kernels"][i])
        metric_frames.append(m)
    merged["flows"] = _concat(flow_frames, "flows")
    merged["metrics"] = _concat(metric_frames, "metrics")
    merged["devices"] = _concat(dev_frames, "devices")
    def on_merged_clock(name: str, remap_device: bool) -> pd.DataFrame:
        """A timed per-rank table (memory events, CPU samples) on the merged clock, rank (and
        devices), sorted by time."""
        frames = []
        for i, t in enumerate(traces):
            df = t.table(name).copy()
            if len(df):
                df["start"] = df["start"].to_numpy() + shifts[i]
                df["rank"] = np.full(len(df), ranks[i], dtype=np.int32)
                if remap_device:
                    df["device"] = remap_devices(df["device"].to_numpy(), device_maps[i])
            frames.append(df)
        out = _concat(frames, name)
        return out.sort_values("start", kind="stable").reset_index(drop=True) if len(out) else out

    # graph launches are linked again from the flows (below)
    mem = on_merged_clock("memory", remap_device=True)
    if len(mem):
        mem["id"] = np.arange(len(mem), dtype=np.int64)
    merged["memory"] = mem
    merged["cpu_samples"] = on_merged_clock("cpu_samples", remap_device=False)

    first = traces[0].meta
    for t, r, p in zip(traces, ranks, paths):
        warnings.extend(w.about(p, f"rank {r} ({p.name})") for w in t.meta.warnings)
    extra = dict(first.extra)
    extra["rank_files"] = {str(r): p.name for r, p in zip(ranks, paths)}
    meta = TraceMeta(
        path=str(folder),
        source_format=first.source_format,
        format_label=f"{first.format_label or label}, {len(traces)} rank{'s' if len(traces) != 1 else ''}",
        tool=first.tool,
        tool_version=first.tool_version,
        origin_ns=origin,
        time_zero=f"earliest rank's {first.time_zero}" if len(traces) > 1 and any(shifts) else first.time_zero,
        ranks=list(ranks),
        host=first.host if len({t.meta.host for t in traces}) == 1 else "",
        program=first.program,
        warnings=warnings,
        extra=extra,
    )
    return link_graphs(Trace(meta=meta, **merged))


def load(path: Path, progress: Progress, cancel: CancelToken) -> Trace:
    folder = Path(path)
    if not folder.is_dir():
        raise LoadError(folder, "is not a folder", LABEL)
    found = survey(folder)
    specs: list[tuple[Path, LoaderSpec]] = []
    skipped: list[tuple[str, str]] = list(found.skipped)
    unreadable: list[tuple[str, str]] = []
    for f in found.files:
        cancel.check()
        spec, why, readable = _member(f)
        if spec is None:
            (skipped if readable else unreadable).append((f.name, why))
        else:
            specs.append((f, spec))
    if not specs:
        raise UnsupportedFormat(folder, describe(folder, detect), LABEL)
    # one format per folder: the most common one (a stray report next to the ranks is ignored)
    counts: dict[str, int] = {}
    for _, s in specs:
        counts[s.name] = counts.get(s.name, 0) + 1
    fmt = max(counts, key=lambda k: (counts[k], -min(i for i, (_, s) in enumerate(specs) if s.name == k)))
    member_label = next(s.label for _, s in specs if s.name == fmt)
    skipped += [(f.name, f"a {s.label}, not {member_label}") for f, s in specs if s.name != fmt]
    paths = [f for f, s in specs if s.name == fmt]

    results = _load_all(paths, progress, cancel, worker_count(len(paths)))
    if any(r.cancelled for r in results):
        raise LoadCancelled("load cancelled")

    traces: list[Trace] = []
    good_paths: list[Path] = []
    failed: list[MemberResult] = []
    for p, r in zip(paths, results):
        if r.error:
            failed.append(r)
            continue
        try:
            # zero copy: the merge only reads the ranks' columns, and writes fresh ones
            traces.append(r.encoded if isinstance(r.encoded, Trace) else kio.cache.codec.decode_trace(r.encoded, zero_copy=True))
        except kio.cache.codec.CacheDamaged as exc:  # pragma: no cover - in-memory blobs do not get damaged
            failed.append(MemberResult(str(p), error=f"{p}: {exc}"))
            continue
        good_paths.append(p)
    if not traces:
        raise LoadError(folder, f"none of its {len(paths)} rank files could be loaded; first problem: {failed[0].error}", LABEL)
    one_run(folder, good_paths, traces, member_label)
    progress(0.92, "merging ranks")
    heads = [read_head(p) for p in good_paths]
    ranks, rank_warnings = _assign_ranks(good_paths, traces, heads)
    trace = merge_ranks(folder, good_paths, traces, ranks, member_label)
    trace.meta.warnings[:0] = (
        [Diagnostic.warning("ranks_assumed", folder, w) for w in rank_warnings]
        + [
            Diagnostic.warning("truncated" if r.truncated else "skipped", r.path, f"skipped a rank file that could not be loaded: {r.error}")
            for r in failed
        ]
        + [Diagnostic.warning("skipped", folder / name, f"skipped {name}: {why}") for name, why in unreadable]
    )
    if skipped:
        shown = Survey(folder, skipped=skipped).skipped_text()
        n = len(skipped)
        trace.meta.warnings.append(
            Diagnostic.warning(
                "ignored", folder, f"ignored {n} file{'s' if n != 1 else ''} of the folder that {'are' if n != 1 else 'is'} not {member_label}: {shown}"
            )
        )
    return trace


LOADER = LoaderSpec(name="ranks", label=LABEL, priority=10, sniff=sniff, load=load, directories=True)
