"""JSON as kviewer writes it: one encoder (msgspec) for every JSON document it produces.

The CLI's ``--format json``, ``fleet.json``, the window's saved lane layout and the JSON kept in
the caches all go through :func:`encode`, so they agree on what a value becomes:

* numpy numbers are numbers, numpy booleans booleans, arrays lists;
* an unknown value is ``null``, never 0: NaN, ``None``, ``pd.NA`` and ``NaT``. Infinities are
  ``null`` too: JSON has no spelling for them, and the stdlib's ``NaN``/``Infinity`` are not JSON
  (strict parsers, ``jq`` and browsers refuse the document);
* text is written as it is (UTF-8, no ``\\u`` escapes but for control characters).

msgspec writes the 25,680-row speed-of-light table of the 153 MB sample about 2x faster than the
stdlib (BENCHMARKS.md, "JSON output"). Floats are the shortest text that reads back as the same
number, as with the stdlib, though spelled ``1e16`` where the stdlib writes ``1e+16``: the values
are equal.
"""

from __future__ import annotations

import datetime as _dt
from typing import IO, Any

import msgspec

__all__ = ["encode", "to_text", "write"]


def _enc_hook(value: Any) -> Any:
    """What msgspec cannot encode itself: numpy scalars and arrays, pandas' missing values."""
    import numpy as np

    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):  # float32/float16 (float64 is a float: msgspec's own)
        return float(value)
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (np.datetime64, np.timedelta64)):
        return None if np.isnat(value) else str(value)
    import pandas as pd

    if value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, (pd.Timestamp, _dt.datetime, _dt.date)):
        return value.isoformat()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


_ENCODER = msgspec.json.Encoder(enc_hook=_enc_hook)


def encode(doc: Any, indent: int = 0) -> bytes:
    """``doc`` as UTF-8 JSON; ``indent`` > 0 puts each value on a line of its own, indented that much."""
    data = _ENCODER.encode(doc)
    return msgspec.json.format(data, indent=indent) if indent > 0 else data


def to_text(doc: Any, indent: int = 0) -> str:
    """:func:`encode` as text."""
    return encode(doc, indent).decode("utf-8")


def write(doc: Any, out: IO[str], indent: int = 1) -> None:
    """One JSON document and a newline to the text stream ``out``."""
    out.write(to_text(doc, indent))
    out.write("\n")
