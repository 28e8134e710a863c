"""rocprofv2 file-plugin kernel CSV (ROCm 5.5 - 6.x), e.g. rocprof-compute's ``timestamps.csv``.

Header: ``Dispatch_ID,GPU_ID,Queue_ID,PID,TID,Grid_Size,Workgroup_Size,LDS_Per_Workgroup,
Scratch_Per_Workitem,Arch_VGPR,Accum_VGPR,SGPR,Wave_Size,Kernel_Name,Start_Timestamp,
End_Timestamp,Correlation_ID``; in counter mode the counters follow as extra columns.
``GPU_ID`` is the KFD gpu_id (a hash-like number such as 60633, not an index), so devices are
numbered 0, 1, ... in increasing GPU_ID order and the devices table says which GPU_ID each is.
Kernel names end in `` (.kd)``, removed as for every rocprof name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from kviewer.core import Trace, TraceMeta, schema
from kviewer.errors import LoadError
from kviewer.io.rocprof import common as rc
from kviewer.io.registry import CancelToken, LoaderSpec
from kviewer.io.source import Progress, read_content

RECOGNISED = "rocprofv2 kernel CSV"
KNOWN = {
    "dispatchid", "gpuid", "queueid", "pid", "tid", "gridsize", "workgroupsize", "ldsperworkgroup",
    "scratchperworkitem", "archvgpr", "accumvgpr", "sgpr", "wavesize", "kernelname",
    "starttimestamp", "endtimestamp", "correlationid", "sig", "obj",
}
REQUIRED = ["dispatchid", "gpuid", "kernelname", "starttimestamp", "endtimestamp"]
SPELLED = {"dispatchid": "Dispatch_ID", "gpuid": "GPU_ID", "kernelname": "Kernel_Name",
           "starttimestamp": "Start_Timestamp", "endtimestamp": "End_Timestamp"}


def sniff(head: bytes, path: Path) -> bool:
    fields = set(rc.header_fields(head))
    # rocprofv3 files have Agent_Id / Kind instead of GPU_ID
    return {"dispatchid", "gpuid", "kernelname", "starttimestamp"} <= fields and "kind" not in fields


def load(path: Path, progress: Progress, cancel: CancelToken) -> Trace:
    content = read_content(path, progress)
    cancel.check()
    table = rc.read_csv_text(content.data, path, RECOGNISED, as_text=lambda c: c == "kernelname" or c not in KNOWN)
    rc.require(table, REQUIRED, path, RECOGNISED, SPELLED)
    n = len(table.frame)
    if n == 0:
        raise LoadError(path, "has a header but no kernel dispatches", RECOGNISED)
    warnings = list(table.warnings)
    if content.truncated:
        warnings.append(rc.compressed_cut(path))

    def ints(name: str) -> np.ndarray:
        return rc.numbers(table, name, path, RECOGNISED)

    begin = ints("starttimestamp")
    end = ints("endtimestamp")
    end = rc.clamp_ends(begin, end, warnings, path)
    base = rc.rebase([begin])
    assert base is not None
    gpu = ints("gpuid")
    device, gpu_ids = rc.dense_ids(gpu)
    name, short = rc.kernel_names(table.text("kernelname"))
    cols: dict[str, Any] = {
        "name": name,
        "short_name": short,
        "start": begin - base,
        "end": end - base,
        "device": device,
    }
    for src, dst in (("queueid", "stream"), ("pid", "pid"), ("tid", "tid"), ("ldsperworkgroup", "shared_mem")):
        if table.has(src):
            cols[dst] = ints(src)
    if table.has("correlationid"):
        corr = ints("correlationid")
        cols["correlation"] = np.where(corr > 0, corr, -1)  # 0 = not recorded
    if table.has("gridsize", "workgroupsize"):
        grid = ints("gridsize")
        wg = ints("workgroupsize")
        # totals (x*y*z work-items), kept 1-D; workgroups = ceil(work-items / workgroup size)
        cols.update(grid_x=rc.ceil_div(grid, wg), grid_y=np.ones(n), grid_z=np.ones(n),
                    block_x=wg, block_y=np.ones(n), block_z=np.ones(n))
    if table.has("archvgpr"):
        cols["registers"] = ints("archvgpr") + (ints("accumvgpr") if table.has("accumvgpr") else 0)

    counters: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for c in table.columns:
        if c not in KNOWN:
            counters[table.columns[c]] = (rc.numbers(table, c, path, RECOGNISED, integer=False), table.text(c))
    cols.update(rc.dram_columns({k: v[0] for k, v in counters.items()}, n))
    cols.update(rc.flops_columns({k: v[0] for k, v in counters.items()}, n))
    kernels, new_id = schema.make_table_mapped("kernels", n, cols)
    metrics = rc.metrics_from_wide(new_id, counters)
    devices = rc.devices_table(
        [{"id": i, "name": f"AMD GPU (KFD GPU_ID {g})"} for i, g in enumerate(gpu_ids.tolist())]
    )
    extra: dict[str, Any] = rc.clock_extra(base)
    if counters:
        extra["counters"] = ", ".join(counters)
    meta = TraceMeta(
        path=str(path),
        source_format="rocprofv2-csv",
        format_label="rocprofv2 kernel CSV (file plugin / rocprof-compute timestamps.csv header)"
        + (f", {len(counters)} counters" if counters else ""),
        tool="rocprofv2",
        warnings=warnings,
        extra=extra,
    )
    return Trace(meta=meta, kernels=kernels, devices=devices, metrics=metrics)


LOADER = LoaderSpec(
    name="rocprofv2-csv",
    label="rocprofv2 kernel CSV",
    priority=40,
    sniff=sniff,
    load=load,
)
