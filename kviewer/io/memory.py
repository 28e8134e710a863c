"""The memory budget of a load (``KVIEWER_MAX_MEMORY``) and the watch that enforces it.

A hostile or simply enormous file must not take the machine down: while a load runs, a watcher
thread samples the process's resident memory every few tens of milliseconds and, past the
budget, fails the load's :class:`~kviewer.io.registry.CancelToken` with a
:class:`~kviewer.errors.MemoryLimitExceeded`; the loader stops at its next check (SQLite queries
within milliseconds, through their progress handler). The budget is
``KVIEWER_MAX_MEMORY`` (``8G``, ``500M``, ``60%`` of physical memory), by default
:data:`DEFAULT_SHARE` of physical memory, and never more than 90% of an address-space limit
(``ulimit -v``) the process runs under.
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path
from typing import Any

from kviewer.errors import MemoryLimitExceeded

ENV = "KVIEWER_MAX_MEMORY"
#: share of physical memory one process may use by default
DEFAULT_SHARE = 0.6
#: how often the watcher samples the resident set, in seconds
INTERVAL = 0.025

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """``"2G"``, ``"500MiB"``, ``"1048576"`` -> bytes (binary multiples)."""
    m = _SIZE_RE.match(text)
    if not m:
        raise ValueError(f"not a size: {text!r} (use e.g. 500M or 2G)")
    scale = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}[m.group(2).lower()]
    return int(float(m.group(1)) * scale)


def physical_memory() -> int | None:
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def _address_space_limit() -> int | None:
    try:
        import resource
    except ImportError:  # pragma: no cover - not on POSIX
        return None
    soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
    return None if soft == resource.RLIM_INFINITY else int(soft)


def memory_budget() -> int:
    """The most resident memory a load may take the process to, in bytes."""
    phys = physical_memory() or 16 * 1024**3
    budget = int(phys * DEFAULT_SHARE)
    value = os.environ.get(ENV, "").strip()
    if value:
        try:
            budget = int(phys * float(value[:-1]) / 100) if value.endswith("%") else parse_size(value)
        except ValueError:
            pass  # a bad value keeps the default (the CLI says so: check_budget_setting)
    limit = _address_space_limit()
    if limit is not None:
        budget = min(budget, int(limit * 0.9))
    return max(budget, 64 * 1024**2)


def check_budget_setting() -> str | None:
    """A problem with ``KVIEWER_MAX_MEMORY``'s value, in words; None when it is fine or unset."""
    value = os.environ.get(ENV, "").strip()
    if not value:
        return None
    try:
        if value.endswith("%"):
            pct = float(value[:-1])
            if not 0 < pct <= 100:
                raise ValueError
        else:
            parse_size(value)
    except ValueError:
        return f"{ENV}={value!r} is not a size (e.g. 8G, 500M) or a share of memory (e.g. 60%)"
    return None


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def rss() -> int:
    """The process's resident memory now, in bytes (0 when the system does not say)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        pass
    try:  # no /proc (macOS, Windows): psutil reads the platform's own figure, in bytes everywhere
        import psutil

        return int(psutil.Process().memory_info().rss)
    except (ImportError, OSError):  # pragma: no cover
        return 0


def _vm_size() -> int:
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[0]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


class MemoryWatch:
    """While active, fails ``token`` with :class:`MemoryLimitExceeded` once memory passes the budget.

    Resident memory is checked against the budget; under an address-space limit the mapped size
    is too (it reaches the limit first), so the load stops with a clear error, not a MemoryError
    in the middle of somewhere.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        token: Any,
        recognised: str | None = None,
        budget: int | None = None,
        tick: Any = None,
    ) -> None:
        self.path = Path(path)
        self.tick = tick
        """called on every sample (the load's progress heartbeat rides on this thread)"""
        self.token = token
        self.recognised = recognised
        self.budget = memory_budget() if budget is None else budget
        limit = _address_space_limit()
        self.vm_budget = int(limit * 0.92) if limit is not None else None
        self.peak = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "MemoryWatch":
        self.over()  # a load that starts over the budget stops at its first check
        self._thread = threading.Thread(target=self._run, name="kviewer-memory-watch", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1)
        self.over()  # a load quicker than one sample is still held to the budget

    def over(self) -> bool:
        """Sample now; True (and the token failed) when past the budget."""
        now = rss()
        self.peak = max(self.peak, now)
        vm = _vm_size() if self.vm_budget is not None else 0
        if now > self.budget or (self.vm_budget is not None and vm > self.vm_budget):
            used, budget = (vm, self.vm_budget) if self.vm_budget is not None and vm > self.vm_budget else (now, self.budget)
            self.token.fail(
                MemoryLimitExceeded(
                    self.path,
                    f"loading it needs more memory than the budget: stopped at {used / 1024**3:.1f} GiB of "
                    f"{budget / 1024**3:.1f} GiB (raise {ENV}, e.g. {ENV}=16G, if the machine has room)",
                    self.recognised,
                )
            )
            return True
        return False

    def _run(self) -> None:
        while not self._stop.wait(INTERVAL):
            if self.over():
                return
            if self.tick is not None:
                try:
                    self.tick()
                except Exception:  # noqa: BLE001 - a progress callback's failure must not end the watch
                    self.tick = None
