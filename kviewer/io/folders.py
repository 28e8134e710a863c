"""What a folder holds: the files a folder loader may read, and everything it skips, with why.

A folder is untrusted input too: it can hold symlink loops, FIFOs, devices, unreadable files or
tens of thousands of entries. :func:`survey` looks at each entry once (``stat``, never ``open``)
and sorts it into candidate files and skipped entries with a reason, so a user is told what was
left out instead of a blanket "no trace files"; :func:`describe` says in one line what a folder
that no loader claims holds.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kviewer import io as kio
from kviewer.errors import LoadError, UnsupportedFormat

if TYPE_CHECKING:
    import kviewer.io.source

#: a folder with more files than this is not taken for one run's per-rank traces
MAX_RANK_FILES = 4096
#: entries looked at, at most (a folder with more is described, not loaded)
MAX_ENTRIES = 200_000
#: files sniffed to say of which kinds a folder's files are, at most, and for how long
MAX_SNIFFED = 20_000
SNIFF_SECONDS = 10.0


def _natural_key(name: str) -> list[Any]:
    """rank-2 before rank-10."""
    return [int(t) if t.isdigit() else t.lower() for t in re.split(r"(\d+)", name)]


@dataclass
class Survey:
    folder: Path
    files: list[Path] = field(default_factory=list)
    """regular, readable, non-hidden files, in natural name order"""
    skipped: list[tuple[str, str]] = field(default_factory=list)
    """(entry name, why it was skipped)"""
    entries: int = 0
    """entries seen (files, folders, links, ...)"""
    cut: bool = False
    """True when the folder had more than MAX_ENTRIES entries and only those were looked at"""
    links_out: list[tuple[str, str]] = field(default_factory=list)
    """(entry name, where it leads): symbolic links out of the named tree, not followed (also in skipped)"""

    def skipped_text(self, limit: int = 5) -> str:
        """``"self (a symbolic link that loops), rank-3.json (permission denied) and 2 more"``."""
        shown = [f"{name} ({why})" for name, why in self.skipped[:limit]]
        more = len(self.skipped) - limit
        return ", ".join(shown) + (f" and {more:,} more" if more > 0 else "")


def _why_not(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "a symbolic link that loops"
    if exc.errno == errno.ENOENT:
        return "a broken symbolic link"
    if isinstance(exc, PermissionError):
        return "permission denied"
    return f"cannot be read ({exc.strerror or exc})"


def outside(path: str | os.PathLike[str], root: str | os.PathLike[str]) -> str | None:
    """Where a symbolic link ``path`` leads when that is outside the tree ``root`` (resolved), or
    None (not a link, or a link that stays inside)."""
    if not os.path.islink(path):
        return None
    target = os.path.realpath(path)
    base = os.path.realpath(root)
    if target == base or target.startswith(base.rstrip(os.sep) + os.sep):
        return None
    return target


def survey(folder: str | os.PathLike[str], within: str | os.PathLike[str] | None = None) -> Survey:
    """Sort a folder's entries (not recursive) into candidate files and skipped entries.

    ``within``: the tree the user named; a symbolic link leading out of it is not followed (it is
    skipped, and says where it leads)."""
    out = Survey(Path(folder))
    with os.scandir(folder) as it:
        for entry in it:
            out.entries += 1
            if out.entries > MAX_ENTRIES:
                out.cut = True
                break
            name = entry.name
            if name.startswith("."):
                continue  # hidden files (.DS_Store, editor swap files) are not mentioned
            if within is not None and entry.is_symlink():
                target = outside(entry.path, within)
                if target is not None:
                    out.skipped.append((name, f"a symbolic link out of {within} (to {target}), not followed"))
                    out.links_out.append((name, target))
                    continue
            try:
                st = os.stat(entry.path)  # follows links: a link to a trace is a trace
            except OSError as exc:
                out.skipped.append((name, _why_not(exc)))
                continue
            if stat.S_ISDIR(st.st_mode):
                out.skipped.append((name, "a folder, not searched"))
                continue
            kind = kio.source._not_regular(st.st_mode)
            if kind is not None:
                out.skipped.append((name, kind))
                continue
            if not os.access(entry.path, os.R_OK):
                out.skipped.append((name, "permission denied"))
                continue
            out.files.append(Path(entry.path))
    out.files.sort(key=lambda p: _natural_key(p.name))
    return out


def kinds(files: list[Path], detect: Callable[[Path], Any]) -> tuple[Counter[str], int]:
    """How many files are of which format (by content, ``detect``: the registry's, passed in so this
    module stays below the registry), and how many were not looked at (bounds)."""
    counts: Counter[str] = Counter()
    t0 = time.monotonic()
    for i, f in enumerate(files):
        if i >= MAX_SNIFFED or time.monotonic() - t0 > SNIFF_SECONDS:
            return counts, len(files) - i
        try:
            counts[detect(f).label] += 1
        except UnsupportedFormat:
            counts["not a trace kviewer reads"] += 1
        except (LoadError, OSError):
            counts["unreadable"] += 1
    return counts, 0


def describe(folder: str | os.PathLike[str], detect: Callable[[Path], Any]) -> str:
    """One line on a folder no loader claims: how many files, of which kinds (by ``detect``, the
    registry's), what was skipped."""
    try:
        s = survey(folder)
    except OSError as exc:
        return f"is a directory that cannot be listed ({_why_not(exc)})"
    if not s.files and not s.skipped:
        return "is an empty directory"
    counts, unexamined = kinds(s.files, detect)
    parts = [f"{n:,} {label}" for label, n in counts.most_common()]
    if unexamined:
        parts.append(f"{unexamined:,} not examined")
    text = f"is a directory of {len(s.files):,} file{'s' if len(s.files) != 1 else ''}"
    if s.cut:
        text = f"is a directory of more than {MAX_ENTRIES:,} entries; of the first, {len(s.files):,} are files"
    if parts:
        text += f" ({', '.join(parts)})"
    if len(s.files) > MAX_RANK_FILES:
        text += f"; more than {MAX_RANK_FILES:,} files are not taken for one run's per-rank traces: open the files themselves"
    else:
        text += "; none opens as a trace" if not counts or set(counts) <= {"not a trace kviewer reads", "unreadable"} else (
            "; no per-rank traces kviewer opens as one (a folder opens as the PyTorch or Nsight Systems traces of one run's ranks)"
        )
    if s.skipped:
        text += f"; skipped {len(s.skipped):,}: {s.skipped_text()}"
    return text
