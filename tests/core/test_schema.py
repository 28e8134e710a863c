from __future__ import annotations

import numpy as np
import pytest

from kviewer.core import TABLES, Trace, TraceMeta, make_table, make_table_mapped
from kviewer.core.names import short_name, strip_api_version, strip_kd


def test_every_table_declares_unique_columns_with_docs() -> None:
    for table in TABLES.values():
        assert len(set(table.names)) == len(table.names), table.name
        assert all(c.doc for c in table.columns), table.name


def test_make_table_fills_missing_and_sorts_by_start() -> None:
    df = make_table("kernels", 3, {"name": ["a", "b", "c"], "start": [30, 10, 20], "dur": [1, 2, 5]})
    assert list(df.columns) == TABLES["kernels"].names
    assert df["start"].tolist() == [10, 20, 30]
    assert df["end"].tolist() == [12, 25, 31]
    assert df["id"].tolist() == [0, 1, 2]
    assert df["name"].tolist() == ["b", "c", "a"]
    assert (df["device"] == -1).all() and df["device"].dtype == np.int32
    assert df["dram_bytes"].isna().all()
    assert str(df["name"].dtype) == "category"


def test_make_table_rejects_unknown_columns_and_bad_lengths() -> None:
    with pytest.raises(KeyError):
        make_table("kernels", 1, {"nmae": ["x"], "start": [0], "end": [1]})
    with pytest.raises(ValueError):
        make_table("kernels", 2, {"name": ["x"], "start": [0, 1], "end": [1, 2]})


def test_make_table_mapped_returns_final_ids() -> None:
    df, new_id = make_table_mapped("cpu_slices", 3, {"name": ["a", "b", "c"], "start": [5, 1, 3], "end": [6, 2, 4]})
    # the row given first ("a", start 5) is last after sorting
    assert new_id.tolist() == [2, 0, 1]
    assert df.loc[new_id[0], "name"] == "a"


def test_float_times_with_nan_become_minus_one_for_int_columns() -> None:
    df = make_table("kernels", 2, {"name": ["a", "b"], "start": [0, 1], "end": [1, 2], "grid_x": [np.nan, 4.0]})
    assert df["grid_x"].tolist() == [-1, 4]


def test_trace_defaults_are_empty_schema_tables() -> None:
    t = Trace(TraceMeta(path="x", source_format="test"))
    t.validate()
    assert t.sizes() == {name: 0 for name in TABLES}
    assert t.span_ns() is None


def test_span_over_all_time_tables() -> None:
    t = Trace(
        TraceMeta(path="x", source_format="test"),
        kernels=make_table("kernels", 1, {"name": ["k"], "start": [100], "end": [200]}),
        cpu_slices=make_table("cpu_slices", 1, {"name": ["c"], "start": [50], "end": [120]}),
    )
    assert t.span_ns() == (50, 200)


@pytest.mark.parametrize(
    ("name", "short"),
    [
        (
            "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float, false>(int, float)",
            "at::native::(anonymous namespace)::vectorized_layer_norm_kernel",
        ),
        ("void at::native::<unnamed>::multi_tensor_apply_kernel<X<(int)1>, float>(T1, T2)", "at::native::(anonymous namespace)::multi_tensor_apply_kernel"),
        ("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT", "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT"),
        ("Memset (Device)", "Memset (Device)"),
        ("_Z6kernelPf [clone .kd]", "_Z6kernelPf"),
        ("copy_kernel (.kd)", "copy_kernel"),
        ("void cutlass::Kernel2<cutlass_80_tensorop_gemm>(T1::Params)", "cutlass::Kernel2"),
    ],
)
def test_short_name(name: str, short: str) -> None:
    assert short_name(name) == short


def test_api_and_kd_suffixes() -> None:
    assert strip_api_version("cudaLaunchKernel_v7000") == "cudaLaunchKernel"
    assert strip_api_version("cudaMemcpy") == "cudaMemcpy"
    assert strip_kd("foo.kd") == "foo"
