"""Helpers for the hostile-input suite: the CLI in a subprocess, under an address-space cap."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

#: the address-space cap memory checks run under: far below what per-row copies of the hostile
#: files need (4 GB and more), well above what their data needs (a few hundred MB with Python,
#: numpy and pandas mapped)
CAP_BYTES = 2 * 1024**3

#: Ctrl+C comes from a terminal, where SIGINT is delivered. A process started from a background
#: job of a non-interactive shell (``pytest ... &`` in a script, some CI runners) inherits SIGINT
#: *ignored*, and so do its children: kviewer then rightly ignores it too (see
#: test_an_ignored_sigint_is_left_ignored). The Ctrl+C tests therefore start their child as a
#: terminal would, with SIGINT at its default, whatever this test process inherited:
#: ``[sys.executable, "-c", AS_FROM_A_TERMINAL, "-m", "kviewer", ...]``.
AS_FROM_A_TERMINAL = "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"


def wait_until_importing_numpy(proc: subprocess.Popen[bytes], limit: float = 60) -> bool:
    """Until ``proc`` (a ``python -m kviewer`` child) has numpy's core library mapped: it is past
    the interpreter's start and its own first imports, into the command line's (kviewer handles
    Ctrl+C from before that point; a signal sent earlier can find the interpreter still starting,
    whose default disposition kills without a word, or a traceback of its ``site`` imports).
    Linux (``/proc``); elsewhere returns False at once. False also when the process ended."""
    import time

    maps = Path(f"/proc/{proc.pid}/maps")
    if not sys.platform.startswith("linux"):
        return False
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit and proc.poll() is None:
        try:
            if "_multiarray_umath" in maps.read_text():
                return True
        except OSError:
            pass
        time.sleep(0.001)
    return False


def _cap(limit: int):  # type: ignore[no-untyped-def]
    def apply() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return apply


def run_cli(
    args: list[str],
    tmp_path: Path,
    cap: int | None = CAP_BYTES,
    timeout: float = 120,
    **env_extra: str,
) -> subprocess.CompletedProcess[str]:
    """``python -m kviewer ARGS`` with TMPDIR inside ``tmp_path`` (so leftovers can be seen), the
    cache off unless asked for, and an address-space cap."""
    tmpdir = tmp_path / "TMPDIR"
    tmpdir.mkdir(exist_ok=True)
    env = dict(os.environ, TMPDIR=str(tmpdir), KVIEWER_NO_CACHE="1", QT_QPA_PLATFORM="offscreen")
    env.update(env_extra)
    r = subprocess.run(
        [sys.executable, "-m", "kviewer", *args],
        capture_output=True,
        env=env,
        timeout=timeout,
        preexec_fn=_cap(cap) if cap else None,
        cwd=tmp_path,
    )
    # decoded here, not with text=True: universal newlines would turn a lone CR into LF
    return subprocess.CompletedProcess(
        r.args, r.returncode, r.stdout.decode("utf-8", "surrogateescape"), r.stderr.decode("utf-8", "surrogateescape")
    )


def one_error_line(r: subprocess.CompletedProcess[str], path: Path | str) -> str:
    """Assert exit 2 with one line on stderr naming ``path`` and no traceback; return the line."""
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert str(path) in lines[0]
    return lines[0]


def leftovers(tmp_path: Path) -> list[str]:
    """What a run left in its TMPDIR."""
    d = tmp_path / "TMPDIR"
    return sorted(os.listdir(d)) if d.is_dir() else []


def snapshot(folder: Path) -> dict[str, tuple[int, int, str]]:
    """Every entry of a folder (not following links) with size, mtime and link target: to show
    that nothing beside an input changed."""
    out = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            p = Path(root) / name
            st = os.lstat(p)
            out[str(p.relative_to(folder))] = (st.st_size, st.st_mtime_ns, os.readlink(p) if p.is_symlink() else "")
    return out


@pytest.fixture()
def is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0
