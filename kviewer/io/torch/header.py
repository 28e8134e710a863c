"""What the header keys say: devices, tool versions, the format label and the trace's metadata."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from kviewer.core import Diagnostic, make_table
from kviewer.io.torch.events import LABEL, _Doc


def _rank(info: Any) -> int:
    if isinstance(info, dict):
        r = info.get("rank")
        if isinstance(r, str) and r.isdigit():
            r = int(r)
        if isinstance(r, int) and not isinstance(r, bool) and 0 <= r < 2**31:
            return r
    return -1


def _is_amd(doc: _Doc) -> bool:
    if doc.roctracer_version is not None or doc.hip_runtime_version is not None:
        return True
    return any(_vendor_from_name(str(d.get("name", ""))) == "AMD" for d in _device_dicts(doc))


def _device_dicts(doc: _Doc) -> list[dict[str, Any]]:
    props = doc.deviceProperties
    return [d for d in props if isinstance(d, dict)] if isinstance(props, list) else []


def _vendor_from_name(name: str) -> str:
    low = name.lower()
    if any(w in low for w in ("amd", "radeon", "instinct", "gfx")):
        return "AMD"
    if any(w in low for w in ("nvidia", "tesla", "geforce", "quadro", "titan", "rtx")):
        return "NVIDIA"
    return ""


def _int_field(d: dict[str, Any], key: str, limit: int = 2**31) -> int:
    """A non-negative integer property below ``limit`` (the column's range), else -1."""
    v = d.get(key)
    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and 0 <= v < limit:
        return int(v)
    return -1


def _devices(
    path: Path, doc: _Doc, rank: int, amd: bool, kernels: pd.DataFrame, gpu_ops: pd.DataFrame, warnings: list[Diagnostic]
) -> pd.DataFrame:
    """``deviceProperties``, plus a row for each device a GPU event uses that no entry describes
    (so every ``device`` in kernels/gpu_ops has a row).

    Such a device is common on ROCm (roctracer numbers the agent, e.g. device 2, while
    ``deviceProperties`` lists the visible device 0). When every described device is the same
    model, the undescribed one is taken to be that model too, and a warning says so.
    """
    cuda = doc.cuda_runtime_version is not None or doc.cupti_version is not None
    rows: dict[int, dict[str, Any]] = {}
    for pos, d in enumerate(_device_dicts(doc)):
        dev_id = _int_field(d, "id")
        dev_id = pos if dev_id < 0 else dev_id
        name = str(d.get("name", ""))
        vendor = _vendor_from_name(name) or ("AMD" if amd else "NVIDIA" if cuda else "")
        major, minor = _int_field(d, "computeMajor"), _int_field(d, "computeMinor")
        cc = arch = ""
        if vendor != "AMD" and major >= 0 and minor >= 0:
            # HIP reports a gfx major/minor here (gfx90a and gfx908 are both 9.0), not a CUDA
            # compute capability, so only NVIDIA devices get these columns
            cc, arch = f"{major}.{minor}", f"sm_{major}{minor}"
        elif vendor == "AMD":
            # the full target when the file has it (gcnArchName "gfx942:sramecc+:xnack-"), else the
            # family the gfx major/minor names ("gfx94x"): with the CU count it still tells an
            # MI300X (304 CUs) from an MI300A (228) when the name is empty
            target = str(d.get("gcnArchName", "") or "").split(":")[0].strip().lower()
            if target.startswith("gfx"):
                arch = target
            elif 0 <= major < 16 and 0 <= minor < 16:
                arch = f"gfx{major}{minor:x}x"
        rows[dev_id] = {
            "id": dev_id,
            "name": name,
            "vendor": vendor,
            "architecture": arch,
            "compute_capability": cc,
            "sm_count": _int_field(d, "numSms"),
            "memory_bytes": _int_field(d, "totalGlobalMem", 2**63),
        }
    used = set(kernels["device"].tolist()) | set(gpu_ops["device"].tolist())
    undescribed = sorted(u for u in used if u >= 0 and u not in rows)
    models = {(r["name"], r["sm_count"], r["memory_bytes"]) for r in rows.values()}
    template = next(iter(rows.values())) if len(models) == 1 else None
    for dev_id in undescribed:
        if template is not None and (template["name"] or template["architecture"]):
            rows[dev_id] = {**template, "id": dev_id}
        else:
            vendor = "AMD" if amd else ("NVIDIA" if cuda else "")
            rows[dev_id] = {"id": dev_id, "name": "", "vendor": vendor, "architecture": "", "compute_capability": "", "sm_count": -1, "memory_bytes": -1}
    if undescribed and template is not None and (template["name"] or template["architecture"]):
        ids = ", ".join(str(u) for u in undescribed)
        warnings.append(
            Diagnostic.warning(
                "device_assumed",
                path,
                f"device {ids} has no deviceProperties entry; assumed to be the same model as every described device ({template['name'] or template['architecture'] + ', ' + str(template['sm_count']) + ' CUs'})",
            )
        )
    recs = [rows[k] for k in sorted(rows)]
    keys = ("id", "name", "vendor", "architecture", "compute_capability", "sm_count", "memory_bytes")
    cols: dict[str, Any] = {key: [r[key] for r in recs] for key in keys}
    cols["rank"] = [rank] * len(recs)
    return make_table("devices", len(recs), cols)


def _cuda_version(v: Any) -> str:
    """12040 -> '12.4' (CUDA's 1000*major + 10*minor)."""
    if isinstance(v, int) and not isinstance(v, bool) and v >= 1000:
        return f"{v // 1000}.{(v % 1000) // 10}"
    return str(v)


def _hip_version(v: Any) -> str:
    """60443483 -> '6.4.43483' (HIP_VERSION = major*10^7 + minor*10^5 + patch)."""
    if isinstance(v, int) and not isinstance(v, bool) and v >= 10**7:
        return f"{v // 10**7}.{(v // 10**5) % 100}.{v % 10**5}"
    return str(v)


def _tool_version(doc: _Doc) -> str:
    parts = []
    if doc.schemaVersion is not None:
        parts.append(f"schema {doc.schemaVersion}")
    if doc.cuda_runtime_version is not None:
        parts.append(f"CUDA runtime {_cuda_version(doc.cuda_runtime_version)}")
    if doc.cuda_driver_version is not None:
        parts.append(f"driver {_cuda_version(doc.cuda_driver_version)}")
    if doc.cupti_version is not None:
        parts.append(f"CUPTI {doc.cupti_version}")
    if doc.hip_runtime_version is not None:
        parts.append(f"HIP runtime {_hip_version(doc.hip_runtime_version)}")
    if doc.roctracer_version is not None:
        parts.append(f"roctracer {doc.roctracer_version}")
    return ", ".join(parts)


def _label(doc: _Doc, schema_2021: bool, amd: bool, n_gpu: int, n_host: int, n_unknown: int = 0) -> str:
    kineto = doc.schemaVersion is not None or doc.deviceProperties is not None or doc.distributedInfo is not None
    parts = [LABEL if kineto or schema_2021 else "Chrome trace JSON (read as PyTorch profiler events)"]
    if schema_2021:
        parts.append("2021 schema")
    if amd:
        parts.append("ROCm")
    if n_gpu == 0 and n_unknown:
        # events of categories kviewer does not know (another accelerator's device events): not "CPU only"
        parts.append(f"no CUDA/ROCm kernels, {n_unknown:,} events of unknown categories")
    elif n_gpu == 0:
        parts.append("CPU only")
    elif n_host == 0:
        parts.append("GPU only")
    return ", ".join(parts)


def _extra(doc: _Doc, time_note: str) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    for key in ("trace_id", "traceName"):
        v = getattr(doc, key)
        if isinstance(v, (str, int)) and v != "":
            extra["trace_name" if key == "traceName" else key] = v
    if doc.cuda_runtime_version is not None:
        extra["cuda_runtime_version"] = _cuda_version(doc.cuda_runtime_version)
    if doc.cuda_driver_version is not None:
        extra["cuda_driver_version"] = _cuda_version(doc.cuda_driver_version)
    if doc.cupti_version is not None:
        extra["cupti_version"] = doc.cupti_version
    if doc.hip_runtime_version is not None:
        extra["hip_runtime_version"] = _hip_version(doc.hip_runtime_version)
    if doc.hip_driver_version is not None:
        extra["hip_driver_version"] = _hip_version(doc.hip_driver_version)
    if doc.roctracer_version is not None:
        extra["roctracer_version"] = doc.roctracer_version
    options = [k for k in ("record_shapes", "with_stack", "with_flops", "with_modules", "profile_memory") if getattr(doc, k)]
    if options:
        extra["profiler_options"] = ", ".join(options)
    info = doc.distributedInfo
    if isinstance(info, dict):
        for key in ("backend", "world_size"):
            if isinstance(info.get(key), (str, int)):
                extra[f"distributed_{key}"] = info[key]
    extra["timestamps"] = time_note
    return extra
