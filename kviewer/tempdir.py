"""This process's private temporary folder, removed on every exit path (signals included).

Kept out of ``kviewer.io`` (whose package imports pandas) so that the command line can install
its signal cleanup at start-up without loading anything heavy.
"""

from __future__ import annotations

import atexit
import os
import secrets
import shutil
import signal
import stat
import tempfile
import threading
from pathlib import Path
from typing import Any

_private_dir: Path | None = None
_private_lock = threading.Lock()
_PRIVATE_PREFIX = "kviewer-"


def private_tmpdir() -> Path:
    """This process's private temporary folder (mode 0700, made on first use).

    Every temporary file kviewer writes (decompressed exports, SQLite copies, spill files) goes
    here. The folder is removed at exit, on SIGTERM/SIGHUP (:func:`install_signal_cleanup`)
    and, should the process be killed outright, by the next kviewer that starts (folders of
    processes that no longer run are swept).
    """
    global _private_dir
    with _private_lock:
        if _private_dir is None or not _private_dir.is_dir():
            _sweep_stale()
            base = Path(tempfile.gettempdir())
            for _ in range(100):
                # the name is recorded before the folder is made: a signal handled at any point
                # (install_signal_cleanup) finds it recorded, so nothing is left behind
                _private_dir = base / f"{_PRIVATE_PREFIX}{os.getpid()}-{secrets.token_hex(6)}"
                try:
                    os.mkdir(_private_dir, 0o700)
                except FileExistsError:
                    _private_dir = None
                    continue
                break
            else:  # pragma: no cover - 100 names of this process taken
                raise FileExistsError(f"no free name for a private folder in {base}")
            os.chmod(_private_dir, 0o700)  # whatever the umask
            atexit.register(remove_private_tmpdir)
        return _private_dir


_extra_dirs: set[str] = set()


def track_temp_dir(path: str | os.PathLike[str]) -> None:
    """Also remove ``path`` at exit and on SIGTERM/SIGHUP (a temporary folder kept elsewhere,
    e.g. in /dev/shm for speed). :func:`untrack_temp_dir` when the owner removed it itself."""
    _extra_dirs.add(os.fspath(path))
    private_tmpdir()  # registers the exit hook


def untrack_temp_dir(path: str | os.PathLike[str]) -> None:
    _extra_dirs.discard(os.fspath(path))


_extra_files: set[str] = set()


def track_temp_file(path: str | os.PathLike[str]) -> None:
    """Also remove the file ``path`` at exit and on SIGTERM/SIGHUP (an output being written
    under a temporary name, e.g. ``OUT.sqlite.partial``); :func:`untrack_temp_file` once it is
    renamed or removed."""
    _extra_files.add(os.fspath(path))
    private_tmpdir()  # registers the exit hook


def untrack_temp_file(path: str | os.PathLike[str]) -> None:
    _extra_files.discard(os.fspath(path))


def remove_private_tmpdir() -> None:
    """Remove the private temporary folder and everything in it, and the tracked folders (idempotent)."""
    global _private_dir
    folder, _private_dir = _private_dir, None
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)
    for extra in list(_extra_dirs):
        shutil.rmtree(extra, ignore_errors=True)
        _extra_dirs.discard(extra)
    for name in list(_extra_files):
        for suffix in ("", "-journal", "-wal", "-shm"):
            remove_quietly(name + suffix)
        _extra_files.discard(name)


def remove_quietly(path: str | os.PathLike[str]) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _sweep_stale() -> None:
    """Remove private folders left by kviewer processes of this user that no longer run."""
    base = Path(tempfile.gettempdir())
    try:
        entries = list(os.scandir(base))
    except OSError:
        return
    uid = os.getuid() if hasattr(os, "getuid") else None
    for entry in entries[:100_000]:
        name = entry.name
        if not name.startswith(_PRIVATE_PREFIX):
            continue
        pid_text = name[len(_PRIVATE_PREFIX) :].split("-", 1)[0]
        if not pid_text.isdigit():
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode) or (uid is not None and st.st_uid != uid):
            continue
        pid = int(pid_text)
        if pid == os.getpid() or _alive(pid):
            continue
        shutil.rmtree(entry.path, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


class signals_deferred:
    """``with signals_deferred() as held: ...; held.check(); ...``: SIGINT, SIGTERM and SIGHUP
    (or ``names``) that arrive inside wait, so a few statements that make a file and register it
    for removal (:func:`track_temp_file`) run as one, and Ctrl+C never lands inside a Qt callback
    (where PySide swallows it) or a C++ destructor (a crash). Blocking the signals
    (``pthread_sigmask``) is not enough: another thread can take the signal and Python still runs
    the handler in the main thread.

    :meth:`check` raises ``KeyboardInterrupt`` in the caller's own flow, between steps, when a
    SIGINT came. At the end the handlers are put back and, with ``deliver``, the signals that came
    act as usual; without it (:func:`deferred_interrupt`) an interrupt :meth:`check` did not see is
    dropped (the work it would have stopped is done). An ignored signal stays ignored; a nested
    one leaves the signal to the outer one (and :meth:`check` sees the outer one's). Main thread
    only; elsewhere it does nothing and :meth:`check` never raises."""

    NAMES = ("SIGINT", "SIGTERM", "SIGHUP")

    def __init__(self, names: tuple[str, ...] = NAMES, deliver: bool = True) -> None:
        self.names = names
        self.deliver = deliver
        self.previous: dict[int, Any] = {}
        self.pending: list[int] = []
        self._outer: list[signals_deferred] = []

    def _record(self, num: int, frame: Any) -> None:
        self.pending.append(num)

    def __enter__(self) -> "signals_deferred":
        if threading.current_thread() is not threading.main_thread():
            return self
        for name in self.names:
            num = getattr(signal, name, None)
            if num is None:
                continue
            try:
                current = signal.getsignal(num)
            except (OSError, ValueError):
                continue
            if current is signal.SIG_IGN:
                continue  # ignored stays ignored
            outer = getattr(current, "__self__", None)
            if isinstance(outer, signals_deferred):  # nested: the outer one holds it
                if outer not in self._outer:
                    self._outer.append(outer)
                continue
            if not self.deliver and current is not signal.default_int_handler:
                continue  # someone else's handler acts at once: an interrupt never delivered must not be theirs
            try:
                self.previous[num] = signal.signal(num, self._record)
            except (OSError, ValueError):
                continue
        return self

    def check(self) -> None:
        """Raise ``KeyboardInterrupt`` when Ctrl+C (SIGINT) came since the start."""
        for outer in self._outer:
            outer.check()
        if signal.SIGINT in self.pending:
            self.pending = [n for n in self.pending if n != signal.SIGINT]  # acted on: not delivered again
            raise KeyboardInterrupt

    def __exit__(self, *exc: object) -> None:
        for num, handler in self.previous.items():
            signal.signal(num, handler if handler is not None else signal.SIG_DFL)
        self.previous.clear()
        pending, self.pending = self.pending, []
        if self.deliver:
            for num in dict.fromkeys(pending):
                os.kill(os.getpid(), num)  # acts now, with the handler put back


def deferred_interrupt() -> signals_deferred:
    """Ctrl+C while Qt draws: ``with deferred_interrupt() as stop: ...; stop.check(); ...``. SIGINT
    only sets a flag; :meth:`signals_deferred.check` raises the ``KeyboardInterrupt`` between steps,
    where it unwinds cleanly (the command line then exits 130 with "interrupted"). Only Python's
    own SIGINT handler is replaced, and an interrupt no check saw is dropped at the end."""
    return signals_deferred(("SIGINT",), deliver=False)


def install_signal_cleanup() -> None:
    """On SIGTERM / SIGHUP remove the private temporary folder, then die of the signal as usual.

    Call from the main thread (the CLI does); elsewhere it does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    for name in ("SIGTERM", "SIGHUP"):
        signum = getattr(signal, name, None)
        if signum is None:
            continue
        try:
            previous = signal.getsignal(signum)
        except (OSError, ValueError):
            continue
        if previous not in (signal.SIG_DFL, None):
            continue  # someone else handles it

        def handler(num: int, frame: Any) -> None:
            remove_private_tmpdir()
            signal.signal(num, signal.SIG_DFL)
            os.kill(os.getpid(), num)

        signal.signal(signum, handler)
