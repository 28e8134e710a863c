"""The table filter language: parsed, never evaluated; masks equal plain numpy comparisons."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kviewer.session.filterexpr import FilterColumn, FilterError, apply_filter, parse_number

NAMES = ["ampere_sgemm_128x64", "triton_poi_fused_add_gelu_2", "vectorized_elementwise_kernel", "flash attn fwd"]


def _columns(n: int = 40, seed: int = 3) -> dict[str, FilterColumn]:
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, len(NAMES), n)
    dur = rng.integers(100, 2_000_000, n).astype(np.float64)
    dur[::7] = np.nan
    grid = rng.integers(1, 1024, n)
    grid[::5] = -1
    return {
        "name": FilterColumn(codes, "text", NAMES),
        "dur": FilterColumn(dur, "time"),
        "grid_x": FilterColumn(grid, "number", None, True),
        "dram_bytes": FilterColumn(rng.uniform(0, 4e9, n), "number"),
    }


def test_substring_and_regex_and_negation() -> None:
    cols = _columns()
    names = np.array(NAMES, dtype=object)[cols["name"].values]
    n = len(names)
    assert (apply_filter("GEMM", cols, n, name_columns=["name"]) == np.array(["gemm" in s for s in names])).all()
    assert (apply_filter("/^triton_.*fused/", cols, n, name_columns=["name"]) == np.array([s.startswith("triton_") for s in names])).all()
    assert (apply_filter("re:elementwise_kernel$", cols, n, name_columns=["name"]) == np.array([s.endswith("elementwise_kernel") for s in names])).all()
    assert (apply_filter("-gemm", cols, n, name_columns=["name"]) == np.array(["gemm" not in s for s in names])).all()
    assert (apply_filter("not gemm", cols, n, name_columns=["name"]) == np.array(["gemm" not in s for s in names])).all()
    assert (apply_filter('"flash attn"', cols, n, name_columns=["name"]) == np.array([s == "flash attn fwd" for s in names])).all()
    assert (apply_filter("name = flash", cols, n, name_columns=["name"]) == np.zeros(n, bool)).all()
    assert (apply_filter("name ~ ^amp", cols, n, name_columns=["name"]) == np.array([s.startswith("amp") for s in names])).all()
    assert (apply_filter("name !~ ^amp", cols, n, name_columns=["name"]) == np.array([not s.startswith("amp") for s in names])).all()


def test_numeric_conditions_with_units_and_missing_values() -> None:
    cols = _columns()
    dur = cols["dur"].values
    grid = cols["grid_x"].values
    n = len(dur)
    with np.errstate(invalid="ignore"):
        assert (apply_filter("dur > 10us", cols, n) == (dur > 10_000)).all()
        assert (apply_filter("dur<=1.5ms", cols, n) == (dur <= 1.5e6)).all()
        assert (apply_filter("dur >= 0", cols, n) == ~np.isnan(dur)).all()  # unknown never matches
    assert (apply_filter("grid_x >= 128", cols, n) == ((grid >= 128) & (grid != -1))).all()
    assert (apply_filter("grid_x != 5", cols, n) == ((grid != 5) & (grid != -1))).all()
    assert (apply_filter("dram_bytes > 1GB", cols, n) == (cols["dram_bytes"].values > 1e9)).all()
    both = apply_filter("grid_x >= 128 and dur > 10us", cols, n)
    comma = apply_filter("grid_x >= 128, dur > 10us", cols, n)
    space = apply_filter("grid_x >= 128 dur > 10us", cols, n)
    with np.errstate(invalid="ignore"):
        expected = (grid >= 128) & (dur > 1e4)
    assert (both == expected).all() and (comma == expected).all() and (space == expected).all()
    either = apply_filter("grid_x >= 1000 or dur < 1us", cols, n)
    with np.errstate(invalid="ignore"):
        assert (either == (((grid >= 1000) & (grid != -1)) | (dur < 1e3))).all()


def test_python_is_only_text() -> None:
    # nothing is evaluated: code is just words that no kernel name contains
    mask = apply_filter("__import__('os').system('false')", _columns(), 40, name_columns=["name"])
    assert mask is not None and not mask.any()


def test_empty_filter_is_none() -> None:
    assert apply_filter("   ", _columns(), 40) is None


@pytest.mark.parametrize(
    "text,fragment",
    [
        ("dur > ten", "not a number"),
        ("dur > 10xs", "unknown time unit"),
        ("bogus > 3", "unknown column"),
        ("/[unclosed/", "bad regular expression"),
        ("dur >", "needs a value"),
        ("> 3", "unexpected"),
        ("gemm and", "ends after"),
        ("name > 3", "compares numbers"),
        ("dur ~ abc", "compares text"),
    ],
)
def test_errors_are_messages_not_exceptions_of_other_kinds(text: str, fragment: str) -> None:
    with pytest.raises(FilterError, match=fragment):
        apply_filter(text, _columns(), 40, name_columns=["name"])


def test_units() -> None:
    assert parse_number("10us", "time") == 10_000
    assert parse_number("10µs", "time") == 10_000
    assert parse_number("2s", "time") == 2e9
    assert parse_number("1,024", "number") == 1024
    assert parse_number("64k", "number") == 64_000
    assert parse_number("1.5GiB", "number") == 1.5 * 1024**3
    assert parse_number("50%", "number") == 50
    assert parse_number("-3", "number") == -3


@settings(max_examples=60, deadline=None)
@given(
    threshold=st.integers(min_value=-10, max_value=3_000_000),
    op=st.sampled_from([">", ">=", "<", "<=", "=", "!="]),
    unit=st.sampled_from([("ns", 1), ("us", 1_000), ("ms", 1_000_000)]),
)
def test_numeric_filter_matches_numpy(threshold: int, op: str, unit: tuple[str, int]) -> None:
    cols = _columns(60, seed=threshold % 97)
    dur = cols["dur"].values
    value = threshold / unit[1]
    got = apply_filter(f"dur {op} {value!r}{unit[0]}", cols, len(dur))
    t = value * unit[1]
    with np.errstate(invalid="ignore"):
        expected = {">": dur > t, ">=": dur >= t, "<": dur < t, "<=": dur <= t, "=": dur == t, "!=": dur != t}[op]
    expected &= ~np.isnan(dur)
    assert got is not None and (got == expected).all()
