"""GPU peak rates (``resources/devices.toml``) and recognising which GPU a trace ran on.

The table ships inside the package (``kviewer/resources/devices.toml``; the repository's
``resources/devices.toml`` is a symlink to it) and is read with :mod:`tomllib`, so it is found the
same way from a source checkout and from an installed wheel.

Recognition works on what a profiler reports, in this order:

1. the product name, in any of the spellings tools use ("NVIDIA H100 80GB HBM3",
   "NVIDIA A100-SXM4-40GB", "Tesla V100-SXM2-16GB", "AMD Instinct MI300X"), matched with the
   regular expressions in each device's ``match`` list;
2. when the name says nothing (empty, or generic like ROCm's "AMD Radeon Graphics"), the
   architecture (``sm_90``, ``gfx942``) or compute capability, narrowed by SM/CU count, memory size
   and clock. What stays ambiguous is reported as such, never guessed.

A name match is cross-checked against the reported SM/CU count: an MI250X reports each of its two
GCDs as a device with 110 CUs, which is the ``mi250x_gcd`` entry, not the whole package.
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Iterable, Mapping

from kviewer.core import Trace
from kviewer.errors import AnalysisError

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, published as tomli
    import tomli as tomllib

#: numeric fields of a device row (besides the identity fields)
RATE_FIELDS = (
    "fp64_tflops",
    "fp64_tensor_tflops",
    "fp32_tflops",
    "fp32_matrix_tflops",
    "tf32_tflops",
    "fp16_tflops",
    "bf16_tflops",
    "fp8_tflops",
)
OTHER_NUMBER_FIELDS = ("sm_count", "boost_clock_mhz", "memory_gb", "dram_gbs", "l2_mib", "llc_mib")
TEXT_FIELDS = ("name", "vendor", "architecture", "compute_capability", "source", "notes")
LIST_FIELDS = ("match", "derived", "sparse_halved")
KNOWN_FIELDS = frozenset(RATE_FIELDS + OTHER_NUMBER_FIELDS + TEXT_FIELDS + LIST_FIELDS + ("sources",))

#: precisions kviewer reasons about, and the pipe they run on
PRECISIONS = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8")
PIPES = ("tensor", "vector")

# Which rate a (precision, pipe) uses, with fallbacks when a GPU lacks the unit. Non-tensor
# half-precision work is held to the FP32 vector rate: it is elementwise work that is memory-bound
# anyway, and the FP32 rate is the one every datasheet prints.
_PEAK_CHAIN: dict[tuple[str, str], tuple[str, ...]] = {
    ("fp64", "tensor"): ("fp64_tensor_tflops", "fp64_tflops"),
    ("fp64", "vector"): ("fp64_tflops",),
    ("fp32", "tensor"): ("fp32_matrix_tflops", "fp32_tflops"),
    ("fp32", "vector"): ("fp32_tflops",),
    ("tf32", "tensor"): ("tf32_tflops", "fp32_matrix_tflops", "fp32_tflops"),
    ("tf32", "vector"): ("fp32_tflops",),
    ("fp16", "tensor"): ("fp16_tflops", "fp32_matrix_tflops", "fp32_tflops"),
    ("fp16", "vector"): ("fp32_tflops",),
    ("bf16", "tensor"): ("bf16_tflops", "fp32_matrix_tflops", "fp32_tflops"),
    ("bf16", "vector"): ("fp32_tflops",),
    ("fp8", "tensor"): ("fp8_tflops", "fp16_tflops", "fp32_tflops"),
    ("fp8", "vector"): ("fp32_tflops",),
    ("int8", "tensor"): ("int8_tops", "fp8_tflops"),
    ("int8", "vector"): ("fp32_tflops",),
}


@dataclass(frozen=True)
class DeviceSpec:
    """One row of devices.toml."""

    id: str
    name: str
    vendor: str
    architecture: str
    compute_capability: str
    sm_count: int
    boost_clock_mhz: float
    memory_gb: tuple[float, ...]
    dram_gbs: float
    l2_mib: float
    llc_mib: float
    rates: Mapping[str, float]
    """TFLOPS by field name (only the fields the row has)"""
    source: str
    sources: Mapping[str, str] = field(default_factory=dict)
    derived: tuple[str, ...] = ()
    sparse_halved: tuple[str, ...] = ()
    notes: str = ""
    match: tuple[str, ...] = ()

    @property
    def dram_bytes_per_s(self) -> float:
        return self.dram_gbs * 1e9

    def peak_flops(self, precision: str, pipe: str = "tensor") -> tuple[float, str]:
        """Peak FLOP/s for work of this precision on this pipe.

        Returns
        -------
        (flops_per_s, field) where ``field`` names the rate used (e.g. ``"bf16_tflops"``). When the
        GPU lacks the unit (BF16 on a V100) the next rate in the fallback chain is used and the
        field says which. ``(nan, "")`` when none is known.
        """
        chain = _PEAK_CHAIN.get((precision, pipe))
        if chain is None:
            raise ValueError(f"unknown precision/pipe {precision!r}/{pipe!r}")
        for key in chain:
            value = self.rates.get(key)
            if value is not None and value > 0:
                return value * 1e12, key
        return math.nan, ""

    def matches_name(self, normalised: str) -> bool:
        return any(re.search(p, normalised) for p in self.match)


def normalise_device_name(name: str) -> str:
    """Lower-case, punctuation to single spaces: "NVIDIA A100-SXM4-40GB" -> "nvidia a100 sxm4 40gb"."""
    return " ".join(re.sub(r"[^a-z0-9]+", " ", name.lower()).split())


# ---------------------------------------------------------------------------------------------
# loading


def _as_float(value: Any) -> float:
    if value is None:
        return math.nan
    return float(value)


def _parse_row(key: str, row: Mapping[str, Any]) -> DeviceSpec:
    unknown = set(row) - KNOWN_FIELDS
    if unknown:
        raise ValueError(f"devices.toml [{key}]: unknown field(s) {sorted(unknown)}")
    for required in ("name", "vendor", "source", "dram_gbs"):
        if required not in row:
            raise ValueError(f"devices.toml [{key}]: missing {required!r}")
    mem = row.get("memory_gb", ())
    memory = tuple(float(m) for m in (mem if isinstance(mem, list) else [mem]))
    rates = {f: float(row[f]) for f in RATE_FIELDS if f in row}
    for pattern in row.get("match", []):
        re.compile(pattern)
    return DeviceSpec(
        id=key,
        name=str(row["name"]),
        vendor=str(row["vendor"]),
        architecture=str(row.get("architecture", "")),
        compute_capability=str(row.get("compute_capability", "")),
        sm_count=int(row.get("sm_count", -1)),
        boost_clock_mhz=_as_float(row.get("boost_clock_mhz")),
        memory_gb=memory,
        dram_gbs=float(row["dram_gbs"]),
        l2_mib=_as_float(row.get("l2_mib")),
        llc_mib=_as_float(row.get("llc_mib")),
        rates=rates,
        source=str(row["source"]),
        sources=dict(row.get("sources", {})),
        derived=tuple(row.get("derived", ())),
        sparse_halved=tuple(row.get("sparse_halved", ())),
        notes=str(row.get("notes", "")),
        match=tuple(row.get("match", ())),
    )


def load_devices(path: str | Path | None = None) -> dict[str, DeviceSpec]:
    """Every device of devices.toml (the packaged one unless ``path`` is given), by id."""
    if path is None:
        return dict(_packaged_devices())
    with open(path, "rb") as fh:
        data = tomllib.load(fh)
    return {key: _parse_row(key, row) for key, row in data.get("devices", {}).items()}


@lru_cache(maxsize=1)
def _packaged_devices() -> dict[str, DeviceSpec]:
    data = tomllib.loads(resources.files("kviewer").joinpath("resources").joinpath("devices.toml").read_text("utf-8"))
    return {key: _parse_row(key, row) for key, row in data.get("devices", {}).items()}


# ---------------------------------------------------------------------------------------------
# recognition


@dataclass
class Recognition:
    """What a reported device was recognised as.

    ``spec`` is None when nothing matched or the evidence fits several rows with different peaks
    (then ``candidates`` lists them). ``how`` says what decided, for reports.
    """

    spec: DeviceSpec | None
    candidates: list[DeviceSpec]
    how: str
    reported: str

    @property
    def ambiguous(self) -> bool:
        return self.spec is None and len(self.candidates) > 1


def _describe(name: str, architecture: str, cc: str, sm_count: int, memory_bytes: float, clock_hz: float) -> str:
    parts = []
    if name:
        parts.append(repr(name))
    if architecture:
        parts.append(architecture)
    if cc:
        parts.append(f"compute capability {cc}")
    if sm_count > 0:
        parts.append(f"{sm_count} SMs/CUs")
    if memory_bytes > 0:
        parts.append(f"{memory_bytes / 1e9:.0f} GB")
    if clock_hz > 0:
        parts.append(f"{clock_hz / 1e6:.0f} MHz")
    return ", ".join(parts) or "nothing"


def _same_peaks(specs: Iterable[DeviceSpec]) -> bool:
    keys = {(tuple(sorted(s.rates.items())), s.dram_gbs) for s in specs}
    return len(keys) == 1


def _memory_fits(spec: DeviceSpec, memory_bytes: float) -> bool:
    # tools report bytes while vendors market "GB" that are often GiB (80 GiB = 85.9e9 bytes; the
    # H200's 141 GB reports 150.1e9): accept 0.95-1.12 of the marketed figure, which still
    # separates 80/94 GB H100s and 192/256 GB MI300X/MI325X
    gb = memory_bytes / 1e9
    return any(0.95 <= gb / m <= 1.12 for m in spec.memory_gb if m > 0)


def _arch_key(architecture: str) -> str:
    a = architecture.strip().lower()
    m = re.match(r"(gfx[0-9a-f]+x?)", a)
    if m:
        return m.group(1)
    m = re.match(r"sm_?(\d+)", a)
    if m:
        return f"sm_{m.group(1)}"
    return a


#: names that say nothing about the product (ROCm calls MI300 agents "AMD Radeon Graphics")
GENERIC_NAMES = frozenset({"amd radeon graphics", "radeon graphics", "graphics device", "cuda device"})
#: what to do about a GPU the table does not hold (said with "not in kviewer's device table")
CHOOSE_DEVICE = ("choose the GPU with the closest peaks with --device ID (kviewer sol, fusion, report) or in the Roofline dock, "
                 "or add a row with the vendor's published peaks to resources/devices.toml")


def recognise(
    name: str = "",
    architecture: str = "",
    compute_capability: str = "",
    sm_count: int = -1,
    memory_bytes: float = -1,
    clock_hz: float = math.nan,
    devices: Mapping[str, DeviceSpec] | None = None,
) -> Recognition:
    """Recognise a GPU from what a trace reports about it (see the module docstring)."""
    table = devices if devices is not None else _packaged_devices()
    sm_count = int(sm_count) if sm_count is not None and sm_count == sm_count else -1
    memory_bytes = float(memory_bytes) if memory_bytes is not None else -1.0
    clock_hz = float(clock_hz) if clock_hz is not None else math.nan
    reported = _describe(name, architecture, compute_capability, sm_count, memory_bytes, clock_hz)
    norm = normalise_device_name(name or "")
    arch = _arch_key(architecture)
    if not arch and compute_capability:
        cc_match = re.match(r"(\d+)\.(\d+)", compute_capability.strip())
        if cc_match:
            arch = f"sm_{cc_match.group(1)}{cc_match.group(2)}"

    by_name = [s for s in table.values() if norm and s.matches_name(norm)]
    if len(by_name) == 1:
        spec = by_name[0]
        if sm_count > 0 and spec.sm_count > 0 and sm_count != spec.sm_count:
            # e.g. "AMD Instinct MI250X" reported per GCD (110 CUs): prefer the row that has the
            # reported unit count on the same architecture
            same = [s for s in table.values() if s.architecture == spec.architecture and s.sm_count == sm_count]
            if same and (len(same) == 1 or _same_peaks(same)):
                return Recognition(same[0], same, f"name {name!r} with {sm_count} SMs/CUs", reported)
            return Recognition(
                spec,
                [spec],
                f"name {name!r} (reports {sm_count} SMs/CUs where the {spec.name} has {spec.sm_count}: "
                "a partition or a cut-down part; peaks are the full device's)",
                reported,
            )
        return Recognition(spec, [spec], f"name {name!r}", reported)
    if len(by_name) > 1:
        narrowed = _narrow(by_name, sm_count, memory_bytes, clock_hz)
        if len(narrowed) == 1 or (narrowed and _same_peaks(narrowed)):
            return Recognition(narrowed[0], narrowed, f"name {name!r} narrowed by size", reported)
        return Recognition(None, narrowed or by_name, f"name {name!r} fits several devices", reported)

    generic = norm in GENERIC_NAMES
    if norm and generic and arch.startswith("gfx") and arch.endswith("x"):
        # ROCm's generic agent name and only the gfx family (HIP's major/minor): too little to tell
        # parts of one family apart (an MI250 GCD has an MI210's 104 CUs and 64 GB)
        return Recognition(None, [], f"{name!r} with only the gfx family {arch} is not enough to tell which GPU; {CHOOSE_DEVICE}",
                           reported)
    if norm and arch and not generic:
        # a name the table does not hold: another product of the same architecture and size (an
        # A10G has the RTX 3080 Ti's 80 sm_86 SMs; an MI210 the 104 CUs and 64 GB of an MI250 GCD
        # that ROCm calls "AMD Radeon Graphics") is not the same GPU; do not guess. Only a trace
        # without a name is identified by architecture and size
        family = arch[:-1] if arch.startswith("gfx") and arch.endswith("x") else arch
        near = [s.id for s in _narrow([s for s in table.values() if _arch_key(s.architecture).startswith(family)], sm_count,
                                      memory_bytes, clock_hz)]
        hint = f" (same architecture and size: {', '.join(near)})" if near else ""
        return Recognition(None, [], f"{name!r} is not in kviewer's device table{hint}; {CHOOSE_DEVICE}", reported)
    if not arch:
        if norm:
            return Recognition(None, [], f"{name!r} is not in kviewer's device table and no architecture is reported; {CHOOSE_DEVICE}",
                               reported)
        return Recognition(None, [], "no name matched and no architecture reported", reported)
    # "gfx94x": a family (HIP reports gfx major/minor, e.g. 9.4, not the full target)
    prefix = arch[:-1] if arch.startswith("gfx") and arch.endswith("x") else None
    candidates = [s for s in table.values() if _arch_key(s.architecture) == arch
                  or (prefix is not None and _arch_key(s.architecture).startswith(prefix))]
    if not candidates:
        return Recognition(None, [], f"{name or 'the device'} ({reported}) is not in kviewer's device table (no device there has "
                           f"architecture {arch}); {CHOOSE_DEVICE}", reported)
    narrowed = _narrow(candidates, sm_count, memory_bytes, clock_hz)
    if not narrowed:
        return Recognition(None, [], f"{name or 'the device'} ({reported}) is not in kviewer's device table; {CHOOSE_DEVICE}", reported)
    evidence = [arch]
    if sm_count > 0:
        evidence.append(f"{sm_count} SMs/CUs")
    if memory_bytes > 0:
        evidence.append(f"{memory_bytes / 1e9:.0f} GB")
    if clock_hz > 0:
        evidence.append(f"{clock_hz / 1e6:.0f} MHz")
    how = " + ".join(evidence)
    if len(narrowed) == 1:
        return Recognition(narrowed[0], narrowed, how, reported)
    if narrowed and _same_peaks(narrowed):
        return Recognition(narrowed[0], narrowed, how + " (candidates have identical peaks: " + ", ".join(s.id for s in narrowed) + ")", reported)
    return Recognition(None, narrowed or candidates, how + " fits several devices", reported)


def _narrow(candidates: list[DeviceSpec], sm_count: int, memory_bytes: float, clock_hz: float) -> list[DeviceSpec]:
    out = list(candidates)
    if sm_count > 0:
        exact = [s for s in out if s.sm_count == sm_count]
        out = exact if exact else []
    if memory_bytes > 0 and len(out) > 1:
        fit = [s for s in out if _memory_fits(s, memory_bytes)]
        out = fit or out
    if clock_hz == clock_hz and clock_hz > 0 and len(out) > 1:
        near = [s for s in out if s.boost_clock_mhz == s.boost_clock_mhz and abs(s.boost_clock_mhz * 1e6 - clock_hz) <= 0.03 * clock_hz]
        out = near or out
    return out


def find_device(query: str, devices: Mapping[str, DeviceSpec] | None = None) -> DeviceSpec:
    """A device by id ("h100_sxm"), table name or any reported spelling ("NVIDIA H100 80GB HBM3").

    Raises
    ------
    AnalysisError
        listing the known ids when nothing (or more than one device) fits.
    """
    table = devices if devices is not None else _packaged_devices()
    q = query.strip()
    key = q.lower().replace("-", "_").replace(" ", "_")
    if key in table:
        return table[key]
    norm = normalise_device_name(q)
    exact = [s for s in table.values() if normalise_device_name(s.name) == norm]
    if len(exact) == 1:
        return exact[0]
    hits = [s for s in table.values() if s.matches_name(norm)]
    if len(hits) == 1:
        return hits[0]
    if len(hits) > 1:
        raise AnalysisError(f"--device {query!r} fits several devices: {', '.join(s.id for s in hits)}", advice="pass one of these ids")
    raise AnalysisError(f"unknown device {query!r}", advice=device_hint(table))


def _row_value(row: Mapping[Any, Any], key: str) -> Any:
    value = row.get(key)
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def device_hint(devices: Mapping[str, DeviceSpec] | None = None) -> str:
    table = devices if devices is not None else _packaged_devices()
    return "pass --device with one of: " + ", ".join(sorted(table))


def recognise_trace(trace: Trace, devices: Mapping[str, DeviceSpec] | None = None) -> dict[int, Recognition]:
    """Recognition of every device row of ``trace.devices``, by device id."""
    out: dict[int, Recognition] = {}
    for row in trace.devices.to_dict(orient="records"):
        mem = _row_value(row, "memory_bytes")
        clock = _row_value(row, "sm_clock_hz")
        out[int(row["id"])] = recognise(
            name=str(row.get("name") or ""),
            architecture=str(row.get("architecture") or ""),
            compute_capability=str(row.get("compute_capability") or ""),
            sm_count=int(row.get("sm_count", -1)),
            memory_bytes=float(mem) if mem is not None else -1.0,
            clock_hz=float(clock) if clock is not None else math.nan,
            devices=devices,
        )
    return out


def devices_for_trace(
    trace: Trace, override: str | None = None, devices: Mapping[str, DeviceSpec] | None = None
) -> dict[int, DeviceSpec]:
    """The spec for every device id the trace's kernels use.

    ``override`` (the CLI's ``--device``) applies to all of them. Without it each device of
    ``trace.devices`` must be recognised; kernels whose device id has no row (``-1``, or a trace with
    an empty devices table) use the trace's only recognised device.

    Raises
    ------
    AnalysisError
        when a device cannot be recognised, saying what the trace reports and how to pass --device.
    """
    table = devices if devices is not None else _packaged_devices()
    used = sorted({int(d) for d in trace.kernels["device"].unique()}) if len(trace.kernels) else []
    if override:
        spec = find_device(override, table)
        return {d: spec for d in (used or [0])}
    recs = recognise_trace(trace, table)
    if not recs:
        raise AnalysisError("the trace does not say which GPU ran it", path=trace.meta.path, advice=device_hint(table))
    result: dict[int, DeviceSpec] = {}
    problems = []
    for dev_id, rec in recs.items():
        if rec.spec is not None:
            result[dev_id] = rec.spec
        elif dev_id in used or not used:
            if rec.candidates:
                problems.append(
                    f"device {dev_id} ({rec.reported}) could be any of {', '.join(s.id for s in rec.candidates)}"
                )
            else:
                problems.append(f"device {dev_id} ({rec.reported}) is not in the device table")
    if problems:
        raise AnalysisError("; ".join(problems), path=trace.meta.path, advice=device_hint(table))
    distinct = {s.id for s in result.values()}
    for d in used:
        if d not in result:
            if len(distinct) == 1:
                result[d] = next(iter(result.values()))
            else:
                raise AnalysisError(
                    f"kernels on device {d} have no device row and the trace has several GPUs",
                    path=trace.meta.path,
                    advice=device_hint(table),
                )
    return result

