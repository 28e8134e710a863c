"""The GPU_METRICS reader on the schema NVIDIA documents for ``nsys export --type sqlite``:

    GPU_METRICS(timestamp INTEGER, typeId INTEGER NOT NULL, metricId INTEGER NOT NULL, value INTEGER NOT NULL)
    TARGET_INFO_GPU_METRICS(typeId INTEGER NOT NULL, sourceId INTEGER NOT NULL, typeName TEXT NOT NULL,
                            metricId INTEGER NOT NULL, metricName TEXT NOT NULL)

These are unit tests of the reading code (chunking, grouping, ordering, names, devices) on small
databases written here in that shape, checked against SQL over the same database. The check on a
real export (per-step means against SQL over GPU_METRICS of a real training run) lives in
tests/analysis/test_gpu_metrics_real.py and runs when that file is present.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from kviewer.io import nsys_gpu_metrics as gm

NAMES = ["GR Active [Throughput %]", "SMs Active [Throughput %]", "Tensor Active [Throughput %]",
         "DRAM Read Bandwidth [Throughput %]", "DRAM Write Bandwidth [Throughput %]", "GPC Clock Frequency [MHz]"]


def make_db(path: Path, gpus: int = 2, n: int = 1000, period: int = 100_000, shuffle: bool = False, source_id: bool = True,
            seed: int = 1) -> sqlite3.Connection:
    rng = np.random.default_rng(seed)
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE GPU_METRICS (timestamp INTEGER, typeId INTEGER NOT NULL, metricId INTEGER NOT NULL, value INTEGER NOT NULL)")
    cols = "typeId INTEGER NOT NULL, " + ("sourceId INTEGER NOT NULL, " if source_id else "") + \
        "typeName TEXT NOT NULL, metricId INTEGER NOT NULL, metricName TEXT NOT NULL"
    con.execute(f"CREATE TABLE TARGET_INFO_GPU_METRICS ({cols})")
    rows = []
    for g in range(gpus):
        type_id = (3 << 8) | g  # one metric source per GPU, in the GPUs' order
        for m, name in enumerate(NAMES):
            vals = (type_id, 1, f"GPU {g} GH100", m, name) if source_id else (type_id, f"GPU {g} GH100", m, name)
            con.execute(f"INSERT INTO TARGET_INFO_GPU_METRICS VALUES ({','.join('?' * len(vals))})", vals)
        for i in range(n):
            for m in range(len(NAMES)):
                rows.append((1_000_000 + i * period, type_id, m, int(rng.integers(0, 101))))
    if shuffle:
        rows = [rows[i] for i in rng.permutation(len(rows))]
    con.executemany("INSERT INTO GPU_METRICS VALUES (?,?,?,?)", rows)
    con.commit()
    return con


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("source_id", [True, False])
def test_samples_equal_sql(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shuffle: bool, source_id: bool) -> None:
    monkeypatch.setattr(gm, "CHUNK", 777)  # many chunks, groups split across them
    con = make_db(tmp_path / "m.sqlite", shuffle=shuffle, source_id=source_id)
    tables = {r[0] for r in con.execute("select name from sqlite_master where type='table'")}
    df = gm.read_samples(con, tables, {0: 0, 1: 1})
    assert len(df) == con.execute("select count(*) from GPU_METRICS").fetchone()[0]
    # sorted by (device, metric, t); every series strictly in time order
    dev = df["device"].to_numpy()
    code = df["metric"].cat.codes.to_numpy()
    assert (np.diff(dev) >= 0).all()
    for (d, name), part in df.groupby(["device", "metric"], observed=True, sort=False):
        t = part["t"].to_numpy()
        assert (np.diff(t) > 0).all()
        sql = con.execute(
            "select m.timestamp, m.value from GPU_METRICS m join TARGET_INFO_GPU_METRICS n "
            "on m.typeId = n.typeId and m.metricId = n.metricId where (m.typeId & 255) = ? and n.metricName = ? order by m.timestamp",
            (int(d), str(name)),
        ).fetchall()
        assert t.tolist() == [r[0] for r in sql]
        assert part["value"].tolist() == [float(r[1]) for r in sql]
    assert set(df["metric"].cat.categories) == set(NAMES)
    assert len(np.unique(code)) == len(NAMES)
    con.close()


def test_devices_map_through_the_gpu_table(tmp_path: Path) -> None:
    con = make_db(tmp_path / "m.sqlite", gpus=2, n=10)
    tables = {"GPU_METRICS", "TARGET_INFO_GPU_METRICS"}
    # TARGET_INFO_GPU id 0 is CUDA device 3 in one of our samples: the typeIds map through it
    df = gm.read_samples(con, tables, {0: 3, 1: 2})
    assert sorted(set(df["device"].tolist())) == [2, 3]
    assert (df[df["device"] == 3]["t"].count()) == 10 * len(NAMES)
    con.close()


def test_no_metrics_is_an_empty_table(tmp_path: Path) -> None:
    con = sqlite3.connect(tmp_path / "e.sqlite")
    con.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT)")
    df = gm.read_samples(con, {"StringIds"}, {})
    assert len(df) == 0 and list(df.columns) == ["device", "metric", "t", "value"]
    con.close()


def test_a_null_or_fraction_in_a_chunk_is_read_row_by_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gm, "CHUNK", 50)
    con = make_db(tmp_path / "m.sqlite", gpus=1, n=40)
    con.execute("UPDATE GPU_METRICS SET value = 12.5 WHERE rowid = 7")
    con.execute("UPDATE GPU_METRICS SET timestamp = NULL WHERE rowid = 60")
    con.commit()
    df = gm.read_samples(con, {"GPU_METRICS", "TARGET_INFO_GPU_METRICS"}, {0: 0})
    assert len(df) == 40 * len(NAMES) - 1  # the row without a time is left out
    assert 12.5 in df["value"].tolist()
    con.close()


def test_memory_stays_near_the_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The columns are filled in place: the peak while reading stays within 1.5x the final table
    (tracemalloc sees numpy's buffers). The chunk is scaled down with the table (a real 12M-sample
    GPU is ~100 chunks of the default size)."""
    import tracemalloc

    monkeypatch.setattr(gm, "CHUNK", 8192)
    con = make_db(tmp_path / "big.sqlite", gpus=1, n=40_000, period=100_000)
    tables = {"GPU_METRICS", "TARGET_INFO_GPU_METRICS"}
    tracemalloc.start()
    try:
        df = gm.read_samples(con, tables, {0: 0})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    final = int(df.memory_usage(deep=False, index=False).sum())
    assert len(df) == 240_000
    assert peak <= 1.5 * final, (peak, final)
    con.close()


def test_devices_of_types() -> None:
    real = 0x1000100000000  # the one typeId of the real H200 export (vmId 1 in bits 48-55)
    assert gm.devices_of_types([real], {0: 0}) == {real: 0}
    assert gm.devices_of_types([real], {0: 5}) == {real: 5}
    # as many sources as GPUs: ascending typeIds to ascending GPU ids
    assert gm.devices_of_types([real + 0x300, real], {0: 0, 1: 1}) == {real: 0, real + 0x300: 1}
    # otherwise the low byte, read as the GPU's id
    assert gm.devices_of_types([0x301, 0x300, 0x400], {0: 0, 1: 1}) == {0x300: 0, 0x301: 1, 0x400: 0}
