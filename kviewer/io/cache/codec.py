"""The columnar codec: a Trace as column blobs and JSON metadata (stored in the cache, and also
used to ship traces between processes)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import msgspec
import numpy as np
import pandas as pd
import zstandard

from kviewer.core import Trace, TraceMeta, jsonout, schema
from kviewer.core.groups import factorize, narrow_codes
from kviewer.errors import CacheProblem

#: zstd level: level 1 compresses trace columns 3-10x at several hundred MB/s
ZSTD_LEVEL = 1


class CacheDamaged(CacheProblem):
    """A cached entry or the cache database could not be read back."""


class NotCacheable(CacheProblem):
    """The trace holds something the columnar codec cannot store faithfully."""




@dataclass
class ColumnBlob:
    """One column of one table, as stored."""

    table: str
    column: str
    position: int
    kind: str
    """``num`` (numpy bytes), ``cat`` (codes + categories), ``str`` (JSON list), ``strdict`` (the
    distinct texts as a JSON list, then each row's code: ``info`` says where the codes start and
    their dtype) or ``index``"""
    dtype: str
    """numpy dtype of the bytes (num, cat codes) or the pandas dtype (str, strdict)"""
    nrows: int
    info: dict[str, Any]
    data: bytes
    codec: str = "raw"
    """``raw`` or ``zstd``"""


@dataclass
class EncodedTrace:
    """A Trace as plain bytes and JSON: cheap to pickle, store or send to another process."""

    meta: bytes
    columns: list[ColumnBlob] = field(default_factory=list)

    @property
    def nbytes(self) -> int:
        return len(self.meta) + sum(len(c.data) + len(jsonout.encode(c.info)) for c in self.columns)


_meta_encoder = msgspec.json.Encoder()
_meta_decoder = msgspec.json.Decoder(TraceMeta)


def encode_meta(meta: TraceMeta) -> bytes:
    """JSON for a TraceMeta (without its ``source_id``, which a hit takes from the file as it is
    then); :class:`NotCacheable` when it would not read back equal."""
    if meta.source_id is not None:
        meta = replace(meta, source_id=None)
    try:
        data = _meta_encoder.encode(meta)
        back = _meta_decoder.decode(data)
    except (TypeError, msgspec.MsgspecError, ValueError) as exc:
        raise NotCacheable(f"metadata is not JSON: {exc}") from exc
    if back != meta:
        raise NotCacheable("metadata does not survive a JSON round trip")
    return data


def decode_meta(data: bytes) -> TraceMeta:
    try:
        return _meta_decoder.decode(data)
    except (msgspec.MsgspecError, ValueError) as exc:
        raise CacheDamaged(f"metadata: {exc}") from exc


def _compress(data: bytes, compress: bool) -> tuple[bytes, str]:
    if not compress or len(data) < 256:
        return data, "raw"

    return zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_checksum=True).compress(data), "zstd"


def _array_from(blob: ColumnBlob, dtype: np.dtype[Any], count: int) -> np.ndarray:
    """A writable array of ``count`` items from a blob (one copy, straight into place)."""
    out = np.empty(count, dtype=dtype)
    want = out.nbytes
    if blob.codec == "raw":
        if len(blob.data) != want:
            raise CacheDamaged(f"{blob.table}.{blob.column}: {len(blob.data)} bytes, expected {want}")
        if want:
            out.view(np.uint8)[:] = np.frombuffer(blob.data, dtype=np.uint8)
        return out
    if blob.codec != "zstd":
        raise CacheDamaged(f"{blob.table}.{blob.column}: unknown codec {blob.codec!r}")

    try:
        params = zstandard.get_frame_parameters(blob.data)
        if params.content_size != want:
            raise CacheDamaged(f"{blob.table}.{blob.column}: holds {params.content_size} bytes, expected {want}")
        view = out.view(np.uint8).data  # the buffer itself, as a writable memoryview
        got = 0
        with zstandard.ZstdDecompressor().stream_reader(blob.data) as reader:
            while got < want:
                n = reader.readinto(view[got:])
                if not n:
                    break
                got += n
            # reading past the end verifies the frame checksum
            if reader.read(1):
                raise CacheDamaged(f"{blob.table}.{blob.column}: trailing data")
    except zstandard.ZstdError as exc:
        raise CacheDamaged(f"{blob.table}.{blob.column}: {exc}") from exc
    if got != want:
        raise CacheDamaged(f"{blob.table}.{blob.column}: {got} bytes, expected {want}")
    return out


def _bytes_from(blob: ColumnBlob) -> bytes:
    if blob.codec == "raw":
        return blob.data

    try:
        return zstandard.ZstdDecompressor().decompress(blob.data)
    except zstandard.ZstdError as exc:
        raise CacheDamaged(f"{blob.table}.{blob.column}: {exc}") from exc


def _text_from_codes(b: ColumnBlob, as_categories: bool = False) -> Any:
    """A ``strdict`` blob's column: its distinct texts (JSON) taken by its row codes (-1 missing);
    ``as_categories``: as a Categorical of those texts (the same values, coded for a writer)."""
    raw = _bytes_from(b)
    split = int(b.info["texts_bytes"])
    codes_dtype = np.dtype(b.info["codes_dtype"])
    if codes_dtype.kind != "i" or split < 0 or len(raw) - split != codes_dtype.itemsize * b.nrows:
        raise CacheDamaged(f"{b.table}.{b.column}: {len(raw)} bytes do not hold {b.nrows} codes")
    texts = msgspec.json.decode(raw[:split], type=list[str])
    codes = np.frombuffer(raw, dtype=codes_dtype, count=b.nrows, offset=split).astype(np.intp)
    if len(codes) and (int(codes.max()) >= len(texts) or int(codes.min()) < -1):
        raise CacheDamaged(f"{b.table}.{b.column}: text codes out of range")
    dtype: Any = pd.api.types.pandas_dtype(b.dtype)
    if as_categories:
        cats = pd.Index(texts, dtype=dtype)
        if not cats.is_unique:
            raise CacheDamaged(f"{b.table}.{b.column}: repeated texts")
        return pd.Categorical.from_codes(codes, dtype=pd.CategoricalDtype(cats), validate=False)
    if dtype == object:
        if len(codes) and int(codes.min()) < 0:
            raise CacheDamaged(f"{b.table}.{b.column}: a missing value in an object column")
        distinct = np.empty(len(texts), dtype=object)
        distinct[:] = texts
        return distinct[codes]
    return pd.array(texts, dtype=dtype).take(codes, allow_fill=True)


def _str_dtype_ok(dtype: Any) -> bool:
    try:
        return bool(pd.api.types.pandas_dtype(str(dtype)) == dtype)
    except TypeError:
        return False


def encode_frame(name: str, df: pd.DataFrame, compress: bool = True) -> list[ColumnBlob]:
    """A DataFrame as one :class:`ColumnBlob` per column (plus one for a non-default index)."""
    return list(iter_frame(name, df, compress))


def iter_frame(name: str, df: pd.DataFrame, compress: bool = True) -> Iterator[ColumnBlob]:
    """:func:`encode_frame` one column at a time: a column is encoded only when the previous one
    has been taken (the cache stores each before the next is made)."""
    n = len(df)
    if not df.columns.is_unique:
        raise NotCacheable(f"{name}: duplicate column names")
    index = df.index
    if isinstance(index, pd.RangeIndex):
        if not (index.start == 0 and index.step == 1):
            yield ColumnBlob(name, "", -1, "index", "range", n, {"start": index.start, "step": index.step}, b"")
    elif index.dtype.kind in "iu" and index.name is None:
        arr = np.ascontiguousarray(index.to_numpy())
        data, codec = _compress(arr.tobytes(), compress)
        yield ColumnBlob(name, "", -1, "index", arr.dtype.str, n, {}, data, codec)
    else:
        raise NotCacheable(f"{name}: index of type {type(index).__name__}")
    for pos, col in enumerate(df.columns):
        if not isinstance(col, str):
            raise NotCacheable(f"{name}: column name {col!r} is not text")
        s = df[col]
        dt = s.dtype
        if isinstance(dt, pd.CategoricalDtype):
            cats = dt.categories
            if cats.dtype.kind not in "OUT" and not isinstance(cats.dtype, pd.StringDtype):
                raise NotCacheable(f"{name}.{col}: categories of dtype {cats.dtype}")
            values = cats.tolist()
            if any(not isinstance(v, str) for v in values):
                raise NotCacheable(f"{name}.{col}: categories that are not text")
            if not _str_dtype_ok(cats.dtype):
                raise NotCacheable(f"{name}.{col}: categories dtype {cats.dtype}")
            codes = np.ascontiguousarray(s.cat.codes.to_numpy())
            data, codec = _compress(codes.tobytes(), compress)
            info = {"categories": values, "categories_dtype": str(cats.dtype), "ordered": bool(dt.ordered)}
            yield ColumnBlob(name, col, pos, "cat", codes.dtype.str, n, info, data, codec)
        elif isinstance(dt, np.dtype) and dt.kind in "biuf":
            arr = np.ascontiguousarray(s.to_numpy())
            data, codec = _compress(arr.tobytes(), compress)
            yield ColumnBlob(name, col, pos, "num", arr.dtype.str, n, {}, data, codec)
        elif (isinstance(dt, pd.StringDtype) or dt == object) and _str_dtype_ok(dt):
            raw = s.to_numpy(dtype=object)
            codes, uniques = factorize(raw)
            if dt == object and len(codes) and int(codes.min()) < 0:
                # an object column holding None/NaN would not come back as the same object
                raise NotCacheable(f"{name}.{col}: missing values in an object column")
            texts = uniques.tolist()
            if any(not isinstance(v, str) for v in texts):
                raise NotCacheable(f"{name}.{col}: values that are not text")
            if 2 * len(texts) <= n:
                # few distinct texts (kernel names, kinds, notes repeat thousands of times): each
                # stored once, and the rows as their codes; decoding then makes one string object
                # per distinct text, not one per row (a 600k-row SOL table: 2.1 s -> 0.1 s)
                head = msgspec.json.encode(texts)
                codes = narrow_codes(np.asarray(codes))
                data, codec = _compress(head + np.ascontiguousarray(codes).tobytes(), compress)
                info = {"texts_bytes": len(head), "codes_dtype": codes.dtype.str}
                yield ColumnBlob(name, col, pos, "strdict", str(dt), n, info, data, codec)
                continue
            values = s.tolist()
            encoded = msgspec.json.encode([v if isinstance(v, str) else None for v in values])
            data, codec = _compress(encoded, compress)
            yield ColumnBlob(name, col, pos, "str", str(dt), n, {}, data, codec)
        else:
            raise NotCacheable(f"{name}.{col}: dtype {dt}")


def decode_frame(name: str, blobs: Iterable[ColumnBlob], zero_copy: bool = False, text_categories: bool = False) -> pd.DataFrame:
    """Inverse of :func:`encode_frame`; :class:`CacheDamaged` when a blob does not read back.

    ``zero_copy``: uncompressed numeric blobs become read-only views of the blob's bytes instead
    of copies (for a caller that only reads them, e.g. the rank merge). ``text_categories``: text
    columns stored once per distinct text come back as Categoricals of those texts (for a caller
    that only writes the values out: :mod:`kviewer.cli.stream` then formats each text once).
    """

    def array(b: ColumnBlob) -> np.ndarray:
        dtype = np.dtype(b.dtype)
        if zero_copy and b.codec == "raw" and len(b.data) == dtype.itemsize * b.nrows:
            return np.frombuffer(b.data, dtype=dtype, count=b.nrows)
        return _array_from(b, dtype, b.nrows)

    data: dict[str, Any] = {}
    order: list[tuple[int, str]] = []
    index: Any = None
    n: int | None = None
    for b in blobs:
        if n is None:
            n = b.nrows
        elif b.nrows != n:
            raise CacheDamaged(f"{name}.{b.column}: {b.nrows} rows, table has {n}")
        try:
            if b.kind == "index":
                if b.dtype == "range":
                    start, step = int(b.info["start"]), int(b.info["step"])
                    index = pd.RangeIndex(start, start + step * b.nrows, step)
                else:
                    index = pd.Index(array(b))
                continue
            if b.kind == "num":
                values: Any = array(b)
            elif b.kind == "cat":
                codes = array(b)
                cats = pd.Index(b.info["categories"], dtype=b.info["categories_dtype"])
                if len(codes) and (codes.max(initial=-1) >= len(cats) or codes.min(initial=0) < -1):
                    raise CacheDamaged(f"{name}.{b.column}: category codes out of range")
                values = pd.Categorical.from_codes(codes, dtype=pd.CategoricalDtype(cats, ordered=bool(b.info["ordered"])), validate=False)
            elif b.kind == "str":
                items = msgspec.json.decode(_bytes_from(b))
                if not isinstance(items, list) or len(items) != b.nrows:
                    raise CacheDamaged(f"{name}.{b.column}: not a list of {b.nrows} strings")
                dtype: Any = pd.api.types.pandas_dtype(b.dtype)
                if dtype == object:
                    arr = np.empty(len(items), dtype=object)
                    arr[:] = items
                    values = arr
                else:
                    values = pd.array(items, dtype=dtype)
            elif b.kind == "strdict":
                values = _text_from_codes(b, text_categories)
            else:
                raise CacheDamaged(f"{name}.{b.column}: unknown kind {b.kind!r}")
        except (KeyError, TypeError, ValueError, msgspec.MsgspecError) as exc:
            raise CacheDamaged(f"{name}.{b.column}: {type(exc).__name__}: {exc}") from exc
        data[b.column] = values
        order.append((b.position, b.column))
    columns = [c for _, c in sorted(order)]
    df = pd.DataFrame(data, columns=columns, index=index, copy=False)
    if n is not None and len(df) != n:
        raise CacheDamaged(f"{name}: {len(df)} rows, expected {n}")
    return df


def iter_encoded(trace: Trace, compress: bool = True) -> Iterator[ColumnBlob]:
    """The column blobs of a trace, one column at a time (the cache writes each before the next
    is encoded, so at most one column's blob is held beside the trace)."""
    for name in schema.TABLES:
        df = trace.table(name)
        columns = 0
        for blob in iter_frame(name, df, compress):
            columns += blob.kind != "index"
            yield blob
        if not columns:
            raise NotCacheable(f"{name}: no columns")


def encode_trace(trace: Trace, compress: bool = True) -> EncodedTrace:
    """Every table of a trace as column blobs, and its metadata as JSON."""
    enc = EncodedTrace(encode_meta(trace.meta))
    enc.columns.extend(iter_encoded(trace, compress))
    return enc


def decode_trace(enc: EncodedTrace, zero_copy: bool = False) -> Trace:
    meta = decode_meta(enc.meta)
    by_table: dict[str, list[ColumnBlob]] = {}
    for b in enc.columns:
        by_table.setdefault(b.table, []).append(b)
    tables: dict[str, pd.DataFrame] = {}
    for name in schema.TABLES:
        if name not in by_table:
            raise CacheDamaged(f"table {name} is missing")
        tables[name] = decode_frame(name, by_table[name], zero_copy)
    return Trace(meta=meta, **tables)
