"""The one JSON encoder (kviewer.core.jsonout): every document it writes is strict JSON, unknown
values are null (never 0, never the stdlib's NaN/Infinity, which are not JSON), and a plain
document reads back equal to what the stdlib wrote."""

from __future__ import annotations

import io
import json
import math

import numpy as np
import pandas as pd
import pytest

from kviewer.cli.common import dump_json, write_frame
from kviewer.core import jsonout


def _strict(text: str) -> object:
    def refuse(constant: str) -> object:
        raise ValueError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def test_unknown_values_are_null_and_numpy_values_are_numbers() -> None:
    doc = {"nan": float("nan"), "np_nan": np.float64("nan"), "inf": float("inf"), "ninf": np.float64("-inf"),
           "na": pd.NA, "nat": pd.NaT, "f32": np.float32(1.5), "i64": np.int64(3), "u8": np.uint8(7),
           "yes": np.bool_(True), "arr": np.arange(3), "none": None}  # fmt: skip
    out = io.StringIO()
    dump_json(doc, out)
    assert out.getvalue().endswith("}\n")
    got = _strict(out.getvalue())
    assert got == {"nan": None, "np_nan": None, "inf": None, "ninf": None, "na": None, "nat": None, "f32": 1.5,
                   "i64": 3, "u8": 7, "yes": True, "arr": [0, 1, 2], "none": None}  # fmt: skip
    # the stdlib wrote NaN here: no JSON parser in strict mode reads it
    with pytest.raises(ValueError):
        _strict(json.dumps({"x": np.float64("nan")}))


def test_plain_documents_read_back_as_the_stdlib_wrote_them() -> None:
    doc = {"name": "void gemm<float, 128>(é, \u001b[31m)", "n": [1, 2.5, 1e16, 1e-5, -0.0, 2**62], "empty": [], "obj": {},
           "nested": [{"a": True, "b": None}]}  # fmt: skip
    ours = jsonout.to_text(doc, indent=1)
    theirs = json.dumps(doc, indent=1, ensure_ascii=False)
    assert _strict(ours) == json.loads(theirs)
    assert "\\u001b" in ours and "é" in ours  # control characters escaped, the rest as it is


def test_a_table_as_json_keeps_unknown_as_null() -> None:
    df = pd.DataFrame({
        "name": pd.Categorical(["a", None, "c"]),
        "dur_ns": np.array([1, 2, 3], dtype=np.int64),
        "sol_pct": [12.5, math.nan, math.inf],
        "count": pd.array([1, None, 3], dtype="Int64"),
        "ok": [True, False, True],
        "note": ["x", None, "z"],
    })  # fmt: skip
    out = io.StringIO()
    write_frame(df, "json", out)
    rows = _strict(out.getvalue())
    assert rows == [
        {"name": "a", "dur_ns": 1, "sol_pct": 12.5, "count": 1, "ok": True, "note": "x"},
        {"name": None, "dur_ns": 2, "sol_pct": None, "count": None, "ok": False, "note": None},
        {"name": "c", "dur_ns": 3, "sol_pct": None, "count": 3, "ok": True, "note": "z"},
    ]
    empty = io.StringIO()
    write_frame(df.head(0), "json", empty)
    assert empty.getvalue() == "[]\n"


def test_what_cannot_be_json_is_an_error_not_a_guess() -> None:
    with pytest.raises(TypeError):
        jsonout.encode({"x": object()})
