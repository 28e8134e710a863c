"""A cache of parsed traces, so that reopening a big trace is near instant.

Layout
------
One SQLite database (``traces.sqlite``, written through sqlite-utils) in the user's cache
directory: ``$KVIEWER_CACHE_DIR``, else ``$XDG_CACHE_HOME/kviewer``, else ``~/.cache/kviewer``.
Nothing is ever written next to an input file, and inputs are only stat-ed by the cache.

Row-wise tables would be far too slow for half a million events, so the layout is columnar: the
``entries`` table has one row per cached trace (its key, the file's identity and the trace's
metadata as JSON) and the ``columns`` table one row per (trace, table, column) holding the whole
column as one BLOB:

* numeric and boolean columns: the numpy array's bytes;
* ``category`` columns: the integer codes' bytes, with the categories as a JSON list;
* free-text columns: a msgspec-encoded JSON list of strings.

Blobs are zstd-compressed with a checksum, so a damaged blob is detected rather than decoded
into wrong numbers.

Keys and invalidation
---------------------
An entry is keyed by the resolved path, size, modification time (ns), inode change time, inode
and a blake2b digest of the content of the file (the whole file up to 16 MiB, sampled blocks
beyond; for a folder: of every file in it) and by a fingerprint of the code that parsed it (kviewer version,
the schema as data, this cache's format and the size/mtime of the loader sources), so touching
a file, rewriting it with its old size and times, changing the schema or editing a loader all miss. A trace is stored only when its load
was complete (not a partial load of a cut file) and the file did not change during the load.

Bounds and failures
-------------------
The cache is bounded (2 GiB by default; ``KVIEWER_CACHE_MAX_BYTES``, e.g. ``500M``) and evicts
the least recently used traces and analysis results (the ``extras`` table, written by
:mod:`kviewer.session.analysis_cache`) in one order. A trace is written one column blob at a
time inside one transaction, and not at all when that would pass the memory budget. ``KVIEWER_NO_CACHE=1`` (or ``use_cache=False`` / the CLI's
``--no-cache``) bypasses it. A damaged cache database is deleted and rebuilt with a warning;
the cache never makes a load fail.

Modules
-------
:mod:`.keys` (configuration, code fingerprint, source identity), :mod:`.codec` (Trace <-> column
blobs), :mod:`.store` (the database: get, put, eviction, privacy checks).
"""

from __future__ import annotations

import lazy_loader

from kviewer.io.cache.codec import (
    CacheDamaged,
    ColumnBlob,
    EncodedTrace,
    NotCacheable,
    decode_frame,
    decode_meta,
    decode_trace,
    encode_frame,
    encode_meta,
    encode_trace,
)
from kviewer.io.cache.keys import (
    CACHE_FORMAT,
    DEFAULT_MAX_BYTES,
    SourceId,
    cache_dir,
    cache_disabled,
    fingerprint,
    max_bytes_from_env,
    source_id,
)
from kviewer.io.cache.store import DB_NAME, TraceCache, UnsafeCache, default_cache, load_was_complete, secure_cache_files

# the derived-results store (sqldb's exports, POSIX file locks) loads on first use: kviewer.io.cache.derived
__getattr__, _, _ = lazy_loader.attach(__name__, submodules=["derived"])

__all__ = [
    "CACHE_FORMAT",
    "DB_NAME",
    "DEFAULT_MAX_BYTES",
    "CacheDamaged",
    "ColumnBlob",
    "EncodedTrace",
    "NotCacheable",
    "SourceId",
    "TraceCache",
    "UnsafeCache",
    "cache_dir",
    "cache_disabled",
    "decode_frame",
    "decode_meta",
    "decode_trace",
    "default_cache",
    "encode_frame",
    "encode_meta",
    "encode_trace",
    "fingerprint",
    "load_was_complete",
    "max_bytes_from_env",
    "secure_cache_files",
    "source_id",
]
