"""Ctrl+C, SIGTERM and SIGHUP during a command's load: cancel the load, then end the process.

Signal handling only: :func:`kviewer.cli.common.load_trace` wraps each load in :class:`CtrlCCancels`.
"""

from __future__ import annotations

import atexit
import os
import signal
import socket
import sys
import threading
from typing import Any

from kviewer.tempdir import remove_private_tmpdir

__all__ = ["EXIT_INTERRUPTED", "INTERRUPTED", "CtrlCCancels", "CtrlCWitness", "QuietWhileStarting", "quiet_while_ending"]

#: what Ctrl+C ends a command with, wherever it lands: the line on stderr and the exit status
INTERRUPTED = "kviewer: interrupted"
EXIT_INTERRUPTED = 130

#: how the program is started: the console scripts, or ``python -m kviewer``
_PROGRAM_NAMES = ("kviewer", "kviewer-gui", "kviewer.exe", "kviewer-gui.exe")


def _run_as_the_program() -> bool:
    """kviewer is the program (a console script or ``python -m kviewer``), on the main thread:
    only then does the command line change how the process ends on Ctrl+C. A library import or
    a call of :func:`kviewer.cli.main` from other code leaves signal handling alone."""
    argv0 = sys.argv[0] if sys.argv else ""
    program = os.path.basename(argv0) in _PROGRAM_NAMES or argv0.endswith(os.path.join("kviewer", "__main__.py"))
    return program and threading.current_thread() is threading.main_thread()


class QuietWhileStarting:
    """Ctrl+C while the command line imports what it needs (pandas, numpy: a few tenths of a
    second, more on a busy machine) ends the process with "kviewer: interrupted" and 130, as
    later. Python's own handler would print the traceback of whatever import was running, or
    pandas would turn it into "ImportError: Unable to import required dependency numpy".

    Only when kviewer runs as the program (:func:`_run_as_the_program`), where SIGINT has
    Python's default handler (an ignored SIGINT stays ignored). :meth:`end` puts Python's handler
    back once the imports are done.
    """

    def __init__(self) -> None:
        self.active = False
        if not _run_as_the_program():
            return
        try:
            if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
                signal.signal(signal.SIGINT, self._handler)
                self.active = True
        except (OSError, ValueError):
            pass

    @staticmethod
    def _handler(signum: int, frame: Any) -> None:
        remove_private_tmpdir()
        os.write(2, f"{INTERRUPTED}\n".encode())
        os._exit(EXIT_INTERRUPTED)

    def end(self) -> None:
        if self.active and signal.getsignal(signal.SIGINT) is self._handler:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        self.active = False


def quiet_while_ending(code: int) -> None:
    """The command has finished with ``code`` (its output written, its picture saved): Ctrl+C
    from here on, while the interpreter shuts down (atexit callbacks, logging's flush), ends the
    process with that same code, its output flushed and its temporary files removed. Python's
    handler would raise KeyboardInterrupt inside an atexit callback and print "Exception ignored
    in atexit callback" with a traceback after a command that succeeded.

    Only when kviewer runs as the program (where SIGINT has Python's default handler: a new
    handler; and a Ctrl+C handled before is not taken for an unhandled one at the very end,
    :func:`_forget_handled_interrupts`)."""
    if not _run_as_the_program():
        return

    def handler(signum: int, frame: Any) -> None:
        for stream in (sys.stdout, sys.stderr):
            try:
                if stream is not None:
                    stream.flush()
            except (OSError, ValueError):  # a closed pipe or stream: nothing more to write
                pass
        remove_private_tmpdir()
        os._exit(code)

    try:
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, handler)
            _ENDING["handler"] = handler
    except (OSError, ValueError):
        pass
    _forget_handled_interrupts()


#: the handler :func:`quiet_while_ending` installed, while the process ends
_ENDING: dict[str, Any] = {}


def _ignore_ctrl_c_in_the_teardown() -> None:
    """The last atexit callback (registered when the command line is imported, before PySide,
    Dask or any library registers theirs): after it Python resets every signal handler a Python
    function held to the default, then tears the modules down (Qt's objects and libraries among
    them, a few hundred ms after a picture), and a Ctrl+C there killed a command that had finished
    (-2 after a complete report). A SIGINT ignored stays ignored through that, so the process ends
    with the command's code; the atexit callbacks before this one keep :func:`quiet_while_ending`'s
    handler (a Ctrl+C there ends the process at once, with that code)."""
    handler = _ENDING.pop("handler", None)
    try:
        if handler is not None and signal.getsignal(signal.SIGINT) is handler:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
    except (OSError, ValueError):
        pass


atexit.register(_ignore_ctrl_c_in_the_teardown)


def _forget_handled_interrupts() -> None:
    """The process ends with the command's code, also after a Ctrl+C that kviewer handled.

    CPython marks a ``KeyboardInterrupt`` that leaves any ``exec``/``eval`` of a *string* as
    unhandled (``run_eval_code_obj`` in ``Python/pythonrun.c``), and a ``python -m`` run with that
    mark kills itself with SIGINT after finalising, whatever its exit status (``exit_sigint`` in
    ``Modules/main.c``). Such strings run all through the imports a command makes on its way
    (``collections.namedtuple``, ``dataclasses``; shiboken's bootstrap), so a Ctrl+C landing there,
    caught by the command line and answered with "interrupted" and 130, still ended the process
    as killed by SIGINT (-2), at random. Each such run clears the mark as it starts: running an
    empty string clears it for the interrupt already handled; one that escapes from here on marks
    it again, as it should."""
    exec("")  # noqa: S102 - a string on purpose: see above


class CtrlCWitness:
    """``with CtrlCWitness() as ctrl_c: ...``: whether Ctrl+C (SIGINT) came while the command ran,
    whatever became of its ``KeyboardInterrupt``. A library may turn it into an error of its own:
    numpy's C start-up imports ``datetime`` through ``PyCapsule_Import``, which reports a
    KeyboardInterrupt there as "ImportError: PyCapsule_Import could not import module
    'datetime'", and pandas then says "Unable to import required dependency numpy". The command
    line's lazy imports run under Python's own handler, so a Ctrl+C at that moment printed that
    traceback instead of "interrupted".

    Python's C-level handler writes each signal's number to the wakeup fd
    (:func:`signal.set_wakeup_fd`), which this holds while the command runs (a load's
    :class:`CtrlCCancels` takes it over and gives it back: there its own handler decides). Only
    when kviewer runs as the program, on the main thread; elsewhere :meth:`seen` is False."""

    def __init__(self) -> None:
        self.socks: tuple[socket.socket, socket.socket] | None = None
        self.old_fd: int | None = None
        self.got = b""

    def __enter__(self) -> "CtrlCWitness":
        if not _run_as_the_program():
            return self
        try:
            r, w = socket.socketpair()
        except OSError:
            return self
        try:
            r.setblocking(False)
            w.setblocking(False)
            self.old_fd = signal.set_wakeup_fd(w.fileno(), warn_on_full_buffer=False)
        except (OSError, ValueError):
            r.close()
            w.close()
            return self
        self.socks = (r, w)
        return self

    def seen(self) -> bool:
        """A SIGINT came since the start."""
        if self.socks is not None:
            try:
                while True:
                    data = self.socks[0].recv(256)
                    if not data:
                        break
                    self.got += data
            except OSError:  # drained (BlockingIOError)
                pass
        return signal.SIGINT in self.got

    def __exit__(self, *exc: object) -> None:
        if self.socks is None:
            return
        try:
            signal.set_wakeup_fd(self.old_fd if self.old_fd is not None else -1)
        except (OSError, ValueError):
            pass
        for sock in self.socks:
            sock.close()
        self.socks = None


class CtrlCCancels:
    """During a load, Ctrl+C (SIGINT) cancels the load's token, and the load stops within 2 s.

    Three layers, because a signal's Python handler runs only when the main thread runs Python:

    * the SIGINT handler cancels the token and raises KeyboardInterrupt (raised inside a SQLite
      progress callback, KeyboardInterrupt alone is swallowed by the sqlite3 module; the token
      makes the loader stop for certain, and the CLI exits with 130);
    * a watcher thread reads the signal wakeup fd, which the C-level handler writes at once even
      while the main thread is busy in C code (a pandas parse, a long numpy step): it cancels the
      token right away;
    * if the load has still not stopped :data:`GRACE` seconds after SIGINT, SIGTERM or SIGHUP,
      the watcher removes the temporary files and ends the process (exit 130, or 128 + signal).
    """

    GRACE = 1.5

    def __init__(self, token: Any) -> None:
        self.token = token
        self.previous: Any = None
        self.old_fd: int | None = None
        self.fds: tuple[int, int] | None = None
        self.done: Any = None

    def __enter__(self) -> "CtrlCCancels":
        if threading.current_thread() is not threading.main_thread():
            return self
        self.previous = signal.getsignal(signal.SIGINT)
        if self.previous is signal.default_int_handler:
            signal.signal(signal.SIGINT, self._handler)
        else:
            self.previous = None
        self.done = threading.Event()
        try:
            r, w = os.pipe()
            os.set_blocking(w, False)
            self.old_fd = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
            self.fds = (r, w)
            threading.Thread(target=self._watch, args=(r,), name="kviewer-signal-watch", daemon=True).start()
        except (OSError, ValueError):  # no pipes or not allowed: the handler alone
            self.fds = None
        return self

    def _handler(self, signum: int, frame: Any) -> None:
        self.token.cancel()
        raise KeyboardInterrupt

    def _watch(self, r: int) -> None:
        while True:
            try:
                data = os.read(r, 64)
            except OSError:
                return
            if not data or self.done.is_set():
                return
            if self.old_fd is not None and self.old_fd >= 0:  # the wakeup fd taken over (a CtrlCWitness): passed on
                try:
                    os.write(self.old_fd, data)
                except OSError:
                    pass
            for num in data:
                if num == signal.SIGINT:
                    self.token.cancel()
                    self._deadline(EXIT_INTERRUPTED, INTERRUPTED)
                elif num in (signal.SIGTERM, getattr(signal, "SIGHUP", -1)):
                    self.token.cancel()
                    self._deadline(128 + num, "")

    def _deadline(self, code: int, words: str) -> None:
        def force() -> None:
            if self.done.wait(self.GRACE):
                return

            remove_private_tmpdir()
            if words:
                os.write(2, f"{words}\n".encode())
            os._exit(code)

        threading.Thread(target=force, name="kviewer-signal-deadline", daemon=True).start()

    def __exit__(self, *exc: object) -> None:
        if self.done is not None:
            self.done.set()
        if self.fds is not None:
            r, w = self.fds
            try:
                signal.set_wakeup_fd(self.old_fd if self.old_fd is not None else -1)
            except (OSError, ValueError):
                pass
            try:
                os.write(w, b"\0")  # wake the watcher so it sees done and ends
            except OSError:
                pass
            os.close(w)
            # the read end closes with the watcher's last read; leave it to the OS at exit
            self.fds = None
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)

