"""A malformed-input corpus: generic damage applied to every file of a folder.

Nothing here knows the project's formats. Each source file is looked at only as bytes, and as
what its content plainly is -- compressed or not, SQLite, JSON, delimited text -- so a folder of
files the project has never seen (``KVIEWER_FUZZ_DIR``) is damaged the same way as the samples:

* byte level, for any file: the unmodified copy (the baseline), truncations at many offsets,
  flipped bytes (anywhere and in the first 256 bytes), the content under other formats' file
  extensions, a bgzip-style multi-member gzip, and for a compressed file the same damage to the
  decompressed content, compressed again;
* text: invalid UTF-8 inside words, one huge line;
* JSON: deep nesting, deleted keys, values of another type, one key retyped everywhere;
* delimited text: a column removed, added, emptied, filled with junk; ragged rows; header only;
  no header; columns reordered;
* SQLite: a table dropped, emptied, a column dropped, set to NULL or to text, invalid UTF-8 in
  text columns;
* folders that hold several files: one member damaged;
* once per corpus: empty and zero-byte compressed files, a gzip header alone, and bounded
  decompression bombs (gzip, xz, zstd) that open like the sources' heads.

Cases are written into a temporary folder at test time, each in a folder of its own (so files a
loader looks for beside its input cannot leak between cases); random choices are seeded by the
source's name, so a corpus is the same on every run. Big files get a few byte-level cases only.
"""

from __future__ import annotations

import bz2
import csv
import gzip
import io
import lzma
import os
import random
import re
import shutil
import sqlite3
import struct
import zlib
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import msgspec

GZIP = b"\x1f\x8b"
XZ = b"\xfd7zXZ\x00"
ZSTD = b"\x28\xb5\x2f\xfd"
BZ2 = b"BZh"
SQLITE = b"SQLite format 3\x00"

#: file-name endings of the formats kviewer reads (and a few it does not): renamed copies use them
EXTENSIONS = (".sqlite", ".ncu-rep", ".csv", ".json", ".json.gz", ".db", ".log", ".pt.trace.json", ".txt", ".nsys-rep", "")

#: decompressed content above this gets byte-level damage only (no parsing, no recompression)
SMALL = 8 * 1024**2
#: files (on disk) above this get only a few byte-level cases
BIG = 4 * 1024**2

#: what a decompression bomb expands to: bounded, so even a reader without a guard finishes
BOMB_BYTES = 2 * 1024**3
#: the depth of the deeply nested JSON
NEST_DEPTH = 100_000
#: what a word of one line of each source grows by
LONG_LINE = 1024**2
#: the length of the synthetic line without a newline
HUGE_LINE = 32 * 1024**2


@dataclass
class Case:
    """One damaged input."""

    id: int
    path: str
    """the damaged file (or folder), alone in a folder of its own"""
    source: str
    """the file it was made from, relative to its source root ("" for synthetic cases)"""
    family: str
    """the kind of damage, e.g. ``truncate``, ``sqlite-drop-table``"""
    detail: str
    """what exactly was done, e.g. ``at 1234 of 5678``"""
    base: int | None = None
    """id of the baseline case (the unmodified copy of the source), if any"""
    cut: bool = False
    """the content was truncated (a shorter trace must say so, unless cut at a line end)"""
    line_end_cut: bool = False
    """the content was cut right after a newline: a valid shorter file, nothing to warn about"""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# ---------------------------------------------------------------------------------------------
# compression


def compression(raw: bytes) -> str | None:
    if raw.startswith(GZIP):
        return "gzip"
    if raw.startswith(XZ):
        return "xz"
    if raw.startswith(ZSTD):
        return "zstd"
    if raw.startswith(BZ2) and raw[3:4].isdigit():
        return "bz2"
    return None


def decompress(raw: bytes, comp: str | None) -> bytes:
    if comp is None:
        return raw
    if comp == "gzip":
        return gzip.decompress(raw)
    if comp == "xz":
        return lzma.decompress(raw)
    if comp == "bz2":
        return bz2.decompress(raw)
    import zstandard

    return zstandard.ZstdDecompressor().decompressobj().decompress(raw)


def compress(data: bytes, comp: str | None) -> bytes:
    if comp is None:
        return data
    if comp == "gzip":
        return gzip.compress(data, compresslevel=1, mtime=0)
    if comp == "xz":
        return lzma.compress(data, preset=0)
    if comp == "bz2":
        return bz2.compress(data, compresslevel=1)
    import zstandard

    return zstandard.ZstdCompressor(level=1).compress(data)


def gzip_members(data: bytes, parts: int) -> bytes:
    """``data`` as ``parts`` concatenated gzip members (what bgzip or ``cat a.gz b.gz`` write)."""
    step = max(1, -(-len(data) // parts))
    return b"".join(gzip.compress(data[i : i + step], compresslevel=1, mtime=0) for i in range(0, len(data), step))


def gzip_bomb(head: bytes, total: int = BOMB_BYTES, pad: bytes = b" ") -> bytes:
    """A single-member gzip stream of ``head`` followed by ``pad`` bytes up to ``total``.

    Built in well under a second: after a full flush a deflate block depends only on its input,
    so the compressed form of one 16 MiB pad block is repeated; the CRC is computed as usual.
    """
    block = pad * (16 * 1024**2 // len(pad))
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = c.compress(head) + c.flush(zlib.Z_FULL_FLUSH)
    blk = c.compress(block) + c.flush(zlib.Z_FULL_FLUSH)
    again = c.compress(block) + c.flush(zlib.Z_FULL_FLUSH)
    assert blk == again, "deflate output of a repeated block after a full flush should repeat"
    n = max(1, (total - len(head)) // len(block))
    crc = zlib.crc32(head)
    for _ in range(n):
        crc = zlib.crc32(block, crc)
    size = len(head) + n * len(block)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
    return header + first + blk * n + c.flush() + struct.pack("<II", crc, size & 0xFFFFFFFF)


# ---------------------------------------------------------------------------------------------
# what a content is


def is_sqlite(data: bytes) -> bool:
    return data.startswith(SQLITE)


def as_json(data: bytes) -> Any:
    """The parsed document when ``data`` is a JSON object or array, else None."""
    s = data.lstrip()
    if s.startswith(b"\xef\xbb\xbf"):
        s = s[3:].lstrip()
    if s[:1] not in (b"{", b"["):
        return None
    try:
        return msgspec.json.decode(s)
    except (msgspec.DecodeError, RecursionError):
        return None


def text_of(data: bytes) -> str | None:
    """The content as text when it is (mostly) UTF-8 text, else None."""
    if b"\x00" in data[:65536]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("utf-8", errors="replace")
        return text if text.count("\ufffd") < max(8, len(text) // 1000) else None


@dataclass
class Table:
    """Delimited text: lines before the header are kept as they are."""

    prefix: str
    rows: list[list[str]]
    delimiter: str
    quote_all: bool
    newline: str

    def dump(self, rows: list[list[str]] | None = None) -> bytes:
        out = io.StringIO()
        w = csv.writer(
            out,
            delimiter=self.delimiter,
            quoting=csv.QUOTE_ALL if self.quote_all else csv.QUOTE_MINIMAL,
            lineterminator=self.newline,
        )
        w.writerows(self.rows if rows is None else rows)
        return (self.prefix + out.getvalue()).encode("utf-8")


def as_table(text: str) -> Table | None:
    """Split delimited text into a table; None when it does not look like one.

    The header is the first line (of the first hundred) that has at least two fields and is
    followed by a line with at least two fields; lines before it (tool banners) stay verbatim.
    """
    lines = text.splitlines(keepends=True)
    if len(lines) < 2:
        return None
    newline = "\r\n" if lines[0].endswith("\r\n") else "\n"
    for delimiter in (",", "\t", ";"):
        counts = [len(next(csv.reader([ln], delimiter=delimiter), [])) for ln in lines[:101]]
        for i in range(min(100, len(lines) - 1)):
            if counts[i] >= 2 and counts[i + 1] >= 2:
                try:
                    rows = list(csv.reader(io.StringIO("".join(lines[i:])), delimiter=delimiter))
                except csv.Error:
                    return None
                quote_all = lines[i].lstrip("\ufeff").startswith('"')
                return Table("".join(lines[:i]), [r for r in rows if r], delimiter, quote_all, newline)
    return None


# ---------------------------------------------------------------------------------------------
# the generator


@dataclass
class Corpus:
    """Writes cases into ``out``; ``cases`` lists them in order."""

    out: Path
    seed: int = 0
    intensity: int = 1
    """multiplies the random cases per file (truncations, flips, JSON edits): few files, more each"""
    cases: list[Case] = field(default_factory=list)
    _bombed: set[str] = field(default_factory=set)

    # -- writing ----------------------------------------------------------------------------
    def _slot(self, name: str) -> Path:
        folder = self.out / f"{len(self.cases):05d}"
        folder.mkdir(parents=True)
        return folder / name

    def add(self, name: str, data: bytes, source: str, family: str, detail: str, base: int | None = None, **kw: Any) -> Case:
        p = self._slot(name or "unnamed")
        p.write_bytes(data)
        case = Case(len(self.cases), str(p), source, family, detail, base, **kw)
        self.cases.append(case)
        return case

    def add_with(self, name: str, make: Callable[[Path], str], source: str, family: str, base: int | None) -> Case | None:
        """A case whose file ``make(path)`` writes; ``make`` returns the detail, or "" to skip."""
        p = self._slot(name)
        try:
            detail = make(p)
        except (sqlite3.Error, OSError, ValueError):
            detail = ""
        if not detail:
            shutil.rmtree(p.parent)
            return None
        case = Case(len(self.cases), str(p), source, family, detail, base)
        self.cases.append(case)
        return case

    def rng(self, *key: object) -> random.Random:
        return random.Random(":".join(map(str, (self.seed, *key))))

    # -- one source file --------------------------------------------------------------------
    def add_file(self, path: Path, rel: str) -> None:
        raw = path.read_bytes()
        name = path.name
        comp = compression(raw)
        base = self.add(name, raw, rel, "original", f"{len(raw)} bytes").id
        big = len(raw) > BIG
        k = self.intensity
        self._truncations(raw, name, rel, base, "truncate", 3 if big else 8 * k, text_cut=comp is None)
        self._flips(raw, name, rel, base, "flip", 2 if big else 4 * k)
        if big:
            return
        self._renames(raw, name, rel, base, 2)
        try:
            data = decompress(raw, comp)
        except Exception:  # noqa: BLE001 - a source that is itself damaged gets byte-level cases only
            return
        if len(data) > SMALL:
            self._content_cases(data, comp, name, rel, base, small=False)
            return
        self._content_cases(data, comp, name, rel, base, small=True)
        self._bombs(data, name, rel)

    def _truncations(self, raw: bytes, name: str, rel: str, base: int, family: str, count: int,
                     text_cut: bool, comp: str | None = None) -> None:  # fmt: skip
        n = len(raw)
        if n < 2:
            return
        rng = self.rng(rel, family)
        offsets = {1, min(16, n - 1), n // 2, n - 1}
        while len(offsets) < min(count, n - 1):
            offsets.add(rng.randrange(1, n))
        for off in sorted(offsets)[:count]:
            cut = raw[:off]
            line_end = text_cut and cut.endswith(b"\n")
            self.add(name, compress(cut, comp), rel, family, f"at {off} of {n}", base, cut=True, line_end_cut=line_end)

    def _flips(self, raw: bytes, name: str, rel: str, base: int, family: str, count: int, comp: str | None = None) -> None:
        n = len(raw)
        if n == 0:
            return
        rng = self.rng(rel, family)
        plans = [("1 byte", 1, n), ("1 byte in the first 256", 1, min(n, 256)), ("10 bytes", 10, n), ("100 bytes", 100, n)]
        for j in range(count):
            label, k, span = plans[j % len(plans)]
            buf = bytearray(raw)
            where = sorted(rng.randrange(span) for _ in range(k))
            for i in where:
                buf[i] ^= rng.randrange(1, 256)
            self.add(name, compress(bytes(buf), comp), rel, family, f"{label} at {where[:5]}", base)

    def _renames(self, raw: bytes, name: str, rel: str, base: int, count: int) -> None:
        stem = name.split(".", 1)[0] or "file"
        own = name[len(stem) :]
        others = [e for e in EXTENSIONS if e != own]
        for ext in self.rng(rel, "rename").sample(others, min(count, len(others))):
            self.add(stem + ext, raw, rel, "rename", f"{name} -> {stem + ext}", base)

    # -- content-level damage -----------------------------------------------------------------
    def _content_cases(self, data: bytes, comp: str | None, name: str, rel: str, base: int, small: bool) -> None:
        k = self.intensity if small else 1
        if comp is not None:
            self._truncations(data, name, rel, base, "truncate-content", (4 if small else 2) * k, text_cut=True, comp=comp)
            self._flips(data, name, rel, base, "flip-content", (3 if small else 1) * k, comp=comp)
            if comp == "gzip":
                self.add(name, gzip_members(data, 3), rel, "gzip-members", "3 concatenated gzip members", base)
        if is_sqlite(data):
            if small:
                self._sqlite_cases(data, comp, name, rel, base)
            return
        text = text_of(data)
        if text is None:
            return
        self._utf8_cases(data, comp, name, rel, base, count=2 if small else 1)
        if small:
            self._long_line(data, comp, name, rel, base)
        if not small:
            if data.lstrip()[:1] in (b"{", b"["):  # deep nesting needs no parse
                self._nested_cases(data, comp, name, rel, base)
            return
        doc = as_json(data)
        if doc is not None:
            self._nested_cases(data, comp, name, rel, base)
            self._json_cases(data, doc, comp, name, rel, base, count=10 * k)
            return
        table = as_table(text)
        if table is not None:
            self._csv_cases(table, comp, name, rel, base)

    def _utf8_cases(self, data: bytes, comp: str | None, name: str, rel: str, base: int, count: int) -> None:
        bad = (b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\xe2\x82")
        letters = [m.start() for m in re.finditer(rb"[A-Za-z]{4,}", data[: 4 * 1024**2])]
        if not letters:
            return
        rng = self.rng(rel, "utf8")
        for k in (1, 64)[:count]:
            where = sorted({rng.choice(letters) + 1 for _ in range(k)})
            parts, last = [], 0
            for i in where:
                parts += [data[last:i], rng.choice(bad)]
                last = i + 1
            parts.append(data[last:])
            self.add(name, compress(b"".join(parts), comp), rel, "invalid-utf8", f"{len(where)} words", base)

    def _long_line(self, data: bytes, comp: str | None, name: str, rel: str, base: int) -> None:
        # inside a word of the second line (of the middle, for one-line files): one field grows
        nl = data.find(b"\n")
        start = nl + 1 if 0 <= nl < len(data) - 2 else len(data) // 2
        m = re.compile(rb"[A-Za-z]{3,}").search(data, start)
        at = m.start() + 1 if m else start
        self.add(name, compress(data[:at] + b"A" * LONG_LINE + data[at:], comp), rel, "long-line",
                 f"{LONG_LINE} bytes inserted at {at}", base)  # fmt: skip

    # -- JSON ---------------------------------------------------------------------------------
    def _nested_cases(self, data: bytes, comp: str | None, name: str, rel: str, base: int) -> None:
        """Deep nesting: arrays as the first element of the first array; an object as a new first
        key of the document and of the first object inside an array."""
        s = data.lstrip()
        deep = b"[" * NEST_DEPTH + b"]" * NEST_DEPTH
        deep_obj = b'"kvdeep":' + b'{"a":' * NEST_DEPTH + b"1" + b"}" * NEST_DEPTH
        at = s.find(b"[")
        if at >= 0:
            comma = b"," if s[at + 1 :].lstrip()[:1] != b"]" else b""
            self.add(name, compress(s[: at + 1] + deep + comma + s[at + 1 :], comp), rel, "json-nested",
                     f"depth {NEST_DEPTH} arrays in the first array", base)  # fmt: skip
        for label, m in (("the document", re.match(rb"\{", s)), ("the first object in an array", re.search(rb"\[\s*\{", s))):
            if m:
                comma = b"," if s[m.end() :].lstrip()[:1] != b"}" else b""
                self.add(name, compress(s[: m.end()] + deep_obj + comma + s[m.end() :], comp), rel, "json-nested",
                         f"depth {NEST_DEPTH} objects as the first key of {label}", base)  # fmt: skip

    def _json_cases(self, data: bytes, doc: Any, comp: str | None, name: str, rel: str, base: int, count: int) -> None:
        enc = msgspec.json.encode
        s = data.lstrip()
        rng = self.rng(rel, "json")
        for i in range(count):
            fresh = msgspec.json.decode(s) if i else doc
            if i % 3 == 2:
                detail = retype_key(fresh, rng)
                family = "json-retype-key"
            else:
                detail = mutate_node(fresh, rng, delete=i % 3 == 0)
                family = "json-delete" if i % 3 == 0 else "json-retype"
            if detail:
                self.add(name, compress(enc(fresh), comp), rel, family, detail, base)

    # -- delimited text -----------------------------------------------------------------------
    def _csv_cases(self, t: Table, comp: str | None, name: str, rel: str, base: int) -> None:
        header, body = t.rows[0], t.rows[1:]
        ncol = len(header)
        rng = self.rng(rel, "csv")
        cols = list(range(ncol)) if ncol <= 6 else sorted({0, ncol - 1, *rng.sample(range(ncol), 4)})

        def add(family: str, detail: str, rows: list[list[str]]) -> None:
            self.add(name, compress(t.dump(rows), comp), rel, family, detail, base)

        for j in cols:
            add("csv-drop-column", f"column {j} ({header[j][:40]!r}) removed", [r[:j] + r[j + 1 :] for r in t.rows])
        add("csv-extra-column", "a column at the end", [header + ["extra"]] + [r + [str(i)] for i, r in enumerate(body)])
        add("csv-extra-column", "a column at the start", [["Extra"] + header] + [["x"] + r for r in body])
        add("csv-duplicate-column", f"column {cols[-1]} repeated", [r + r[cols[-1] : cols[-1] + 1] for r in t.rows])
        junk = ("", "abc", "-1", "1e400", "99999999999999999999999", "nan", "1,2", '"', "-0", "0x10")
        for j in rng.sample(cols, min(3, len(cols))):
            value = rng.choice(junk)
            add("csv-bad-values", f"column {j} ({header[j][:40]!r}) set to {value!r}",
                [header] + [r[:j] + [value] + r[j + 1 :] for r in body])  # fmt: skip
        ragged = [r if i % 3 else r[:-1] for i, r in enumerate(body)]
        add("csv-ragged", "every third row one field short", [header] + ragged)
        add("csv-ragged", "every third row one field long", [header] + [r if i % 3 else r + ["x"] for i, r in enumerate(body)])
        add("csv-header-only", "the rows removed", [header])
        add("csv-no-header", "the header removed", body)
        order = list(range(ncol))
        rng.shuffle(order)
        add("csv-reorder", "columns in another order", [[r[k] for k in order if k < len(r)] for r in t.rows])

    # -- SQLite -------------------------------------------------------------------------------
    def _sqlite_cases(self, data: bytes, comp: str | None, name: str, rel: str, base: int) -> None:
        work = self.out / "_sqlite_work.db"
        work.write_bytes(data)
        try:
            con = sqlite3.connect(work)
            tables = [r[0] for r in con.execute("select name from sqlite_master where type='table' and name not like 'sqlite_%'")]
            rows = {t: con.execute(f'select count(*) from "{t}"').fetchone()[0] for t in tables}
            columns = {t: [(r[1], (r[2] or "").upper()) for r in con.execute(f'pragma table_info("{t}")')] for t in tables}
            con.close()
        except sqlite3.Error:
            return
        rng = self.rng(rel, "sqlite")
        # the tables that hold data matter most; a few others at random
        busy = sorted((t for t in tables if rows[t]), key=lambda t: -rows[t])[:6]
        rest = [t for t in tables if t not in busy]
        chosen_drop = busy + rng.sample(rest, min(2, len(rest)))

        def edit(sql: Callable[[sqlite3.Connection], str], family: str) -> None:
            def make(p: Path) -> str:
                p.write_bytes(data)
                con = sqlite3.connect(p)
                try:
                    detail = sql(con)
                    con.commit()
                finally:
                    con.close()
                if comp is not None:
                    p.write_bytes(compress(p.read_bytes(), comp))
                return detail

            self.add_with(name, make, rel, family, base)

        for t in chosen_drop:
            edit(lambda con, t=t: drop_table(con, t), "sqlite-drop-table")
        for t in busy[:3]:
            edit(lambda con, t=t: (con.execute(f'delete from "{t}"'), f"{t} emptied")[1], "sqlite-empty-table")
            cols = columns[t]
            for c, _ in rng.sample(cols, min(2, len(cols))):
                edit(lambda con, t=t, c=c: drop_column(con, t, c), "sqlite-drop-column")
            c, _ = rng.choice(cols)
            edit(lambda con, t=t, c=c: (con.execute(f'update "{t}" set "{c}" = null'), f"{t}.{c} set to NULL")[1], "sqlite-null-column")
            c, _ = rng.choice(cols)
            edit(lambda con, t=t, c=c: (con.execute(f'update "{t}" set "{c}" = \'abc\''), f"{t}.{c} set to 'abc'")[1], "sqlite-text-column")
        texts = [(t, c) for t in busy for c, typ in columns[t] if "TEXT" in typ or "CHAR" in typ]
        if texts:
            def bad_text(con: sqlite3.Connection) -> str:
                for t, c in texts:
                    con.execute(f'update "{t}" set "{c}" = cast(x\'41ff42c328e282\' as text) where rowid % 7 = 1')
                return f"invalid UTF-8 in {len(texts)} text columns"

            edit(bad_text, "sqlite-invalid-utf8")
        edit(lambda con: (con.execute("pragma journal_mode=wal"), "switched to WAL mode")[1], "sqlite-wal")
        work.unlink(missing_ok=True)

    # -- once per corpus ----------------------------------------------------------------------
    def _bombs(self, data: bytes, name: str, rel: str) -> None:
        """A bomb that opens like this content, once for each kind of content."""
        kind = "sqlite" if is_sqlite(data) else "json" if data.lstrip()[:1] in (b"{", b"[") else "text" if text_of(data[:4096]) else "binary"
        if kind in self._bombed:
            return
        self._bombed.add(kind)
        head = data[:4096]
        stem = name.split(".", 1)[0] or "bomb"
        self.add(stem + ".gz", gzip_bomb(head), rel, "bomb", f"gzip: {kind} head + {BOMB_BYTES} bytes of spaces")

    def add_synthetic(self) -> None:
        """Inputs that need no source: empty files, empty compressed streams, deep JSON, a long line."""
        for ext in (".json", ".json.gz", ".sqlite", ".csv", ".ncu-rep", ".db"):
            self.add("empty" + ext, b"", "", "empty", f"zero bytes as {ext}")
        for comp in ("gzip", "xz", "bz2", "zstd"):
            self.add(f"empty.json.{comp}", compress(b"", comp), "", "empty-compressed", f"{comp} of zero bytes")
        self.add("header.json.gz", b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03", "", "empty-compressed", "a gzip header alone")
        self.add("nested.json", b"[" * NEST_DEPTH * 10 + b"]" * NEST_DEPTH * 10, "", "json-nested", f"depth {NEST_DEPTH * 10} arrays")
        self.add("nested.json", b'{"traceEvents":' + b"[" * NEST_DEPTH + b"]" * NEST_DEPTH + b"}", "", "json-nested", "depth 1e5 under traceEvents")
        self.add("line.csv", b"a,b,c\n" + b"x" * HUGE_LINE, "", "long-line", f"a {HUGE_LINE} byte line without a newline")
        self.add("nul.json", b'{"traceEvents": [' + b"\x00" * 4096 + b"]}", "", "binary-in-text", "NUL bytes in JSON")

    # -- folders ----------------------------------------------------------------------------
    def add_folder(self, folder: Path, rel: str) -> None:
        """A copy of a small folder, then copies with one member truncated, emptied, flipped."""
        files = sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))
        if len(files) < 2 or len(files) > 16 or sum(p.stat().st_size for p in files) > BIG:
            return
        rng = self.rng(rel, "folder")

        def copy(damage: Callable[[bytes], bytes] | None, victim: Path | None, family: str, detail: str, base: int | None) -> int:
            dest = self._slot(folder.name or "folder")
            dest.mkdir()
            for p in files:
                raw = p.read_bytes()
                (dest / p.name).write_bytes(damage(raw) if damage is not None and p == victim else raw)
            case = Case(len(self.cases), str(dest), rel, family, detail, base)
            self.cases.append(case)
            return case.id

        # (a folder load starts worker processes: a few cases per folder)
        base = copy(None, None, "folder-original", f"{len(files)} files", None)
        damages = (("truncated at half", lambda b: b[: len(b) // 2]), ("emptied", lambda b: b""),
                   ("1 byte flipped in the first 256", lambda b: flip1(b, rng)))  # fmt: skip
        label, damage = rng.choice(damages)
        victim = rng.choice(files)
        copy(damage, victim, "folder-member", f"{victim.name} {label}", base)


def drop_table(con: sqlite3.Connection, table: str) -> str:
    con.execute(f'drop table "{table}"')
    return f"{table} dropped"


def drop_column(con: sqlite3.Connection, table: str, column: str) -> str:
    """``ALTER TABLE DROP COLUMN``, or a rebuilt table when SQLite refuses (indexed, key)."""
    try:
        con.execute(f'alter table "{table}" drop column "{column}"')
    except sqlite3.Error:
        keep = ", ".join(f'"{r[1]}"' for r in con.execute(f'pragma table_info("{table}")') if r[1] != column)
        if not keep:
            return ""
        con.execute(f'create table "kv_fuzz_new" as select {keep} from "{table}"')
        con.execute(f'drop table "{table}"')
        con.execute(f'alter table "kv_fuzz_new" rename to "{table}"')
    return f"{table}.{column} dropped"


def flip1(b: bytes, rng: random.Random) -> bytes:
    if not b:
        return b
    buf = bytearray(b)
    buf[rng.randrange(min(len(b), 256))] ^= 0xFF
    return bytes(buf)


# ---------------------------------------------------------------------------------------------
# JSON tree damage


_OTHER_TYPE: list[Any] = [None, "", "x", 0, -1, 1.5e308, -(2**63), 2**64, True, [], {}, [1, "a"], {"a": 1}]


def _walk(doc: Any, rng: random.Random) -> list[tuple[Any, Any]]:
    """A random path from the root: [(container, key), ...] down to some node."""
    path: list[tuple[Any, Any]] = []
    node = doc
    while isinstance(node, (dict, list)) and node and (not path or rng.random() < 0.8):
        key = rng.choice(list(node)) if isinstance(node, dict) else rng.randrange(len(node))
        path.append((node, key))
        node = node[key]
    return path


def mutate_node(doc: Any, rng: random.Random, delete: bool) -> str:
    """Delete a random node, or replace it with a value of another type; returns the detail."""
    path = _walk(doc, rng)
    if not path:
        return ""
    parent, key = path[-1]
    where = "/".join(str(k) for _, k in path)[:120]
    if delete:
        del parent[key]
        return f"deleted {where}"
    old = parent[key]
    choices = [v for v in _OTHER_TYPE if type(v) is not type(old)]
    parent[key] = new = rng.choice(choices)
    return f"{where}: {type(old).__name__} -> {new!r}"[:200]


def _iter_dicts(doc: Any) -> Iterator[dict[str, Any]]:
    stack = [doc]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            yield node
            stack.extend(v for v in node.values() if isinstance(v, (dict, list)))
        elif isinstance(node, list):
            stack.extend(v for v in node if isinstance(v, (dict, list)))


def retype_key(doc: Any, rng: random.Random) -> str:
    """Give every value of one key (found along random paths) another type."""
    keys: set[str] = set()
    for _ in range(200):
        keys.update(k for c, k in _walk(doc, rng) if isinstance(c, dict))
    if not keys:
        return ""
    key = rng.choice(sorted(keys))
    new = None
    count = 0
    for d in _iter_dicts(doc):
        if key in d:
            if new is None:
                new = rng.choice([v for v in _OTHER_TYPE if type(v) is not type(d[key])])
            d[key] = new
            count += 1
    return f"every {key!r} ({count}) set to {new!r}"


# ---------------------------------------------------------------------------------------------
# sources


def default_roots() -> list[Path]:
    """``KVIEWER_FUZZ_DIR`` (one or more folders, ``os.pathsep``-separated), else the samples."""
    env = os.environ.get("KVIEWER_FUZZ_DIR")
    if env:
        return [Path(p) for p in env.split(os.pathsep) if p]
    repo = Path(__file__).resolve().parents[2]
    samples = Path(os.environ.get("KVIEWER_SAMPLES", repo.parent / "shared" / "samples"))
    return [p for p in (samples, repo / "sample_traces") if p.is_dir()]


def build(roots: list[Path], out: Path, seed: int = 0) -> list[Case]:
    """Every case for every file (and small folder) under ``roots``, written into ``out``.

    A folder of a few files (a plain clone has only ``sample_traces``) gets more random cases
    per file, so the corpus stays a few hundred cases strong.
    """
    listing = {r: sorted(p for p in r.rglob("*") if p.is_file() and not p.name.startswith(".")) for r in roots}
    n_files = sum(map(len, listing.values()))
    corpus = Corpus(out, seed, intensity=max(1, min(4, -(-40 // max(n_files, 1)))))
    corpus.add_synthetic()
    for root in roots:
        files = listing[root]
        for p in files:
            corpus.add_file(p, f"{root.name}/{p.relative_to(root)}")
        for d in sorted({p.parent for p in files}):
            corpus.add_folder(d, f"{root.name}/{d.relative_to(root)}")
    return corpus.cases


def main(argv: list[str] | None = None) -> int:
    """``python -m tests.robustness.corpus [FOLDER ...]``: damage every file of the folders (default:
    ``KVIEWER_FUZZ_DIR`` or the samples), load every case, print the summary and the findings.

    Exit status 1 when there are findings. ``--keep DIR`` writes the cases there and keeps them.
    """
    import argparse
    import tempfile
    import time

    from tests.robustness import harness

    ap = argparse.ArgumentParser(prog="python -m tests.robustness.corpus", description=main.__doc__)
    ap.add_argument("folders", nargs="*", type=Path)
    ap.add_argument("--keep", type=Path, help="write the cases into this (new) folder and keep them")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    roots = args.folders or default_roots()
    out = args.keep or Path(tempfile.mkdtemp(prefix="kviewer-corpus-"))
    try:
        cases = build(roots, out, args.seed)
        t0 = time.perf_counter()
        results = harness.run([c.to_json() for c in cases])
        print(harness.summary(cases, results, time.perf_counter() - t0))
        findings = harness.judge(cases, results)
        print(f"{len(findings)} findings" + (":" if findings else ""))
        for line in findings:
            print("  " + line)
        return 1 if findings else 0
    finally:
        if args.keep is None:
            shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
