"""Decompression on a background thread, feeding the decoder chunk by chunk."""

from __future__ import annotations

import os
import queue
import sys
import threading
from pathlib import Path

from kviewer.errors import LoadError
from kviewer.io.source import OUT_BLOCK, DecompressStream, compression_of, max_decompressed, open_input
from kviewer.io.torch.events import LABEL

#: the most decompressed bytes handed over at once (so a decompression bomb never sits in memory whole)
_OUT_BLOCK = OUT_BLOCK

#: the interpreter's thread switch interval while a reader thread runs. The decompressor releases
#: the GIL, but each time a call returns the thread must take the GIL back from the decoding main
#: thread, which keeps it until the interval (5 ms by default) runs out: with one hand-over per
#: 4 MiB chunk and per raw read, the reader spent most of its time waiting and decompressed at a
#: third of its own speed (1.13 s instead of 0.38 s for the 153 MB trace; the load 1.37 -> 1.12 s).
_SWITCH_INTERVAL = 0.0002
_switch_lock = threading.Lock()
_switch_users = 0
_switch_saved = sys.getswitchinterval()  # replaced by the value in force when the first reader starts


def _short_switch_interval(enter: bool) -> None:
    """Shorten the switch interval for the first reader that starts; restore it when the last ends
    (several loads may run at once, each on its own worker thread)."""
    global _switch_users, _switch_saved
    with _switch_lock:
        if enter:
            if _switch_users == 0:
                _switch_saved = sys.getswitchinterval()
                sys.setswitchinterval(min(_switch_saved, _SWITCH_INTERVAL))
            _switch_users += 1
        else:
            _switch_users -= 1
            if _switch_users == 0:
                sys.setswitchinterval(_switch_saved)


class _Reader:
    """Decompresses ``path`` on a daemon thread into a small queue of byte chunks.

    The decompressors release the GIL, so this runs while the main thread decodes. A stream that
    ends early or is damaged is not an error: ``truncated`` is set and what was decompressed
    before the damage has been delivered.
    """

    def __init__(self, path: Path, max_bytes: int | None = None) -> None:
        self.path = path
        self._file = open_input(path, LABEL)  # the reader thread closes it
        try:
            self.size = max(os.fstat(self._file.fileno()).st_size, 1)
        except OSError as exc:
            self._file.close()
            raise LoadError(path, f"cannot be read ({exc.strerror or exc})", LABEL) from exc
        self.max_bytes = max_decompressed() if max_bytes is None else max_bytes
        self.consumed = 0
        self.produced = 0
        self.truncated = False
        self.compression: str | None = None
        self.failure: BaseException | None = None
        self._queue: queue.Queue[bytes | None] = queue.Queue(maxsize=6)
        self._stop = threading.Event()
        self._ended = False
        self._thread = threading.Thread(target=self._run, name="kviewer-torch-reader", daemon=True)
        self._closed = False
        _short_switch_interval(True)
        try:
            self._thread.start()
        except BaseException:
            self._file.close()
            self.close()
            raise

    def _put(self, item: bytes | None) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _run(self) -> None:
        try:
            with self._file as f:
                self.compression = comp = compression_of(f.read(8))
                f.seek(0)
                # the one decompression path (source.DecompressStream): ratio and absolute caps
                stream = DecompressStream(self.path, f, comp, self.max_bytes, LABEL)
                for out in stream.chunks(_OUT_BLOCK):
                    self.consumed = stream.consumed
                    self.produced = stream.produced
                    if self._stop.is_set() or not self._put(out):
                        return
                self.truncated = stream.truncated
        except LoadError as exc:
            self.failure = exc
        except Exception:  # noqa: BLE001 - a read error mid-file: keep what was delivered and say the file is cut
            self.truncated = True
        finally:
            self._put(None)

    def get(self) -> bytes | None:
        """The next chunk, or None at the end of the stream (and on every call after it)."""
        if self._ended:
            return None
        item = self._queue.get()
        if item is None:
            self._ended = True
            if self.failure is not None:
                raise self.failure
        return item

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        if not self._closed:
            self._closed = True
            _short_switch_interval(False)
