"""Nsight Systems reports (``.nsys-rep``, ``.qdrep``): exported to SQLite with ``nsys``, then read.

The report itself is NVIDIA's binary format; kviewer reads its SQLite export. When ``nsys`` is on
PATH (or ``KVIEWER_NSYS`` names it), the report is exported into the private temporary folder
(``nsys export --type sqlite``), with a heartbeat on the progress callback while nsys works and
the export stopped on cancel (Ctrl+C), and the export is loaded as any nsys SQLite file. Without
nsys the load stops with one line naming the command that makes the export.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from kviewer.core import Trace
from kviewer.errors import LoadCancelled, LoadError, MissingDependency
from kviewer.io import nsys
from kviewer.io.registry import CancelToken, LoaderSpec
from kviewer.io.source import Progress, check_file
from kviewer.tempdir import private_tmpdir

LABEL = "Nsight Systems report (.nsys-rep)"
NAME = "nsys-rep"
#: how the report file begins (QuadD/Nsight Systems report header)
MAGIC = (b"NVIDIA Tegra Profiler Report", b"NVIDIA Nsight Systems Report")
#: the longest an export may take (a very large report takes minutes)
EXPORT_TIMEOUT_S = 3600


def sniff(head: bytes, path: Path) -> bool:
    return head.startswith(MAGIC)


def nsys_command() -> str | None:
    """The nsys executable: ``KVIEWER_NSYS`` when set, else ``nsys`` on PATH; None when absent."""
    named = os.environ.get("KVIEWER_NSYS", "").strip()
    if named:
        return named if os.path.isfile(named) and os.access(named, os.X_OK) else None
    return shutil.which("nsys")


def export_command(nsys_exe: str, report: Path, out: Path) -> list[str]:
    return [nsys_exe, "export", "--type", "sqlite", "--force-overwrite", "true", "--output", str(out), str(report)]


def load(path: Path, progress: Progress, cancel: CancelToken) -> Trace:
    path = Path(path)
    check_file(path)
    exe = nsys_command()
    if exe is None:
        raise MissingDependency(
            path,
            f"kviewer reads the report's SQLite export and nsys is not on PATH: run "
            f"`nsys export --type sqlite --output {path.with_suffix('.sqlite').name} {path.name}` and open the .sqlite",
            LABEL,
        )
    folder = Path(tempfile.mkdtemp(prefix="nsys-export-", dir=private_tmpdir()))
    out = folder / (path.stem + ".sqlite")
    try:
        _export(exe, path, out, progress, cancel)
        return nsys.load_exported(out, path, progress, cancel)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _export(exe: str, report: Path, out: Path, progress: Progress, cancel: CancelToken) -> None:
    log = out.with_suffix(".log")  # nsys's messages (a pipe could fill and stall it)
    try:
        with open(log, "wb") as err_file:
            proc = subprocess.Popen(export_command(exe, report, out), stdout=subprocess.DEVNULL, stderr=err_file,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
    except OSError as exc:
        raise LoadError(report, f"nsys could not be started ({exc.strerror or exc})", LABEL) from exc
    t0 = time.monotonic()
    try:
        while True:
            try:
                proc.wait(timeout=0.2)
                break
            except subprocess.TimeoutExpired:
                pass
            elapsed = time.monotonic() - t0
            if progress is not None:
                # nsys says nothing about how far it is: a heartbeat that never reaches the end
                progress(min(0.3, 0.3 * elapsed / (elapsed + 10.0)), f"nsys export ({elapsed:.0f} s)")
            if elapsed > EXPORT_TIMEOUT_S:
                raise LoadError(report, f"nsys export took longer than {EXPORT_TIMEOUT_S} s", LABEL)
            cancel.check()
    except (LoadCancelled, LoadError, KeyboardInterrupt):
        proc.kill()
        proc.wait()
        raise
    err = log.read_bytes().decode("utf-8", "replace").strip() if log.exists() else ""
    if proc.returncode != 0 or not out.exists():
        last = err.splitlines()[-1] if err else f"exit status {proc.returncode}"
        raise LoadError(report, f"nsys export failed: {last}", LABEL)


LOADER = LoaderSpec(name=NAME, label=LABEL, priority=50, sniff=sniff, load=load)
