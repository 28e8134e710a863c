"""Nsight Compute reports (``.ncu-rep``) through NVIDIA's ``ncu_report`` module (PyPI ``ncu-report``).

Every profiled kernel (an *action* of a *range*) becomes a kernels row; ncu serialises and
replays kernels, so there are no real start times: the kernels are laid end to end in launch
order and marked ``serialised``. Every metric goes into the ``metrics`` table in base units, rule
results and NVTX ranges too (layout in :mod:`kviewer.io.ncu.common`).

Values are read at the metric level (``IMetric.as_double``/``as_uint64``/``as_string``), which
is what ``ncu --csv`` prints: for an instanced metric that is ncu's own aggregate (e.g. the sum
of ``sass__inst_executed_per_opcode``), not the instance list, which is not loaded.

Header fields that the ``ncu_report`` API does not expose (the tool version, the ncu command
line, and from it ``--launch-skip``) are read from the report's record framing: the file is
``NVR\\0`` followed by records ``[uint32 length][protobuf message]``. Walking that framing is also
how a truncated file is told apart from a complete one: ``ncu_report`` loads a cut file silently,
with the kernels that happen to be complete.
"""

from __future__ import annotations

import math
import re
import shlex
import struct
from pathlib import Path
from typing import Any

from kviewer.core import Diagnostic, NcuCapture, Trace, TraceMeta
from kviewer.errors import CorruptTrace, LoadError, MissingDependency, TruncatedTrace
from kviewer.io.ncu import common as nc
from kviewer.io.registry import CancelToken, LoaderSpec
from kviewer.io.source import Progress, compression_of_file, decompress_to_file, open_input, remove_quietly

MAGIC = b"NVR\x00"
LABEL = "Nsight Compute report (.ncu-rep)"


def sniff(head: bytes, path: Path) -> bool:
    return head.startswith(MAGIC)


# ---------------------------------------------------------------------------------------------
# the file's framing and header fields


def _records(data: bytes) -> tuple[list[tuple[int, int]], int]:
    """(offset, length) of every complete record after the magic, and the offset walked to."""
    out: list[tuple[int, int]] = []
    pos = len(MAGIC)
    while pos + 4 <= len(data):
        (length,) = struct.unpack_from("<I", data, pos)
        if pos + 4 + length > len(data):
            break
        out.append((pos + 4, length))
        pos += 4 + length
    return out, pos


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while pos < len(data):
        b = data[pos]
        value |= (b & 0x7F) << shift
        pos += 1
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            break
    raise ValueError("bad varint")


def _string_at(data: bytes, tag: int) -> tuple[str, int] | None:
    """The protobuf length-delimited string whose tag byte is at ``tag``: (text, body offset)."""
    try:
        length, body = _varint(data, tag + 1)
    except ValueError:
        return None
    if body + length > len(data):
        return None
    try:
        return data[body : body + length].decode("utf-8"), body
    except UnicodeDecodeError:
        return None


_TARGET = re.compile(rb"\n\x15Nsight Compute Target\x12")
_NCU_EXE = re.compile(rb"(?:ncu|ncu\.exe|nv-nsight-cu-cli) ")


def header_fields(data: bytes) -> dict[str, Any]:
    """Report format version, tool version and command line, as far as the report records them.

    Best effort: a field that cannot be found is left out.
    """
    out: dict[str, Any] = {}
    head = data[len(MAGIC) :]
    if len(head) >= 6 and head[4] == 0x08:  # first record: field 1 (varint) = format version
        try:
            out["format_version"], _ = _varint(head, 5)
        except ValueError:
            pass
    m = _TARGET.search(data)
    if m:
        found = _string_at(data, m.end() - 1)
        if found:
            out["build"] = found[0]
            vm = re.match(r"\s*(\d+(?:\.\d+)+)", found[0])
            if vm:
                out["tool_version"] = vm.group(1)
    # the command line is a string field (tag 'Z': field 11, wire type 2) that begins with the
    # path of the ncu executable: find the executable, then the tag whose string spans it
    for cm in _NCU_EXE.finditer(data):
        for tag in range(cm.start() - 1, max(cm.start() - 1024, -1), -1):
            if data[tag] != 0x5A:
                continue
            found = _string_at(data, tag)
            if found and found[1] <= cm.start() and found[1] + len(found[0].encode()) >= cm.end() and found[0].isprintable():
                out["command"] = found[0].strip()
                break
        if "command" in out:
            break
    if out.get("command"):
        out.update(_launch_options(out["command"]))
    return out


def _launch_options(cmd: str) -> dict[str, Any]:
    """--launch-skip / --launch-count / --kernel-name from an ncu command line."""
    try:
        argv = shlex.split(cmd)
    except ValueError:
        argv = cmd.split()
    opts: dict[str, Any] = {}
    names = {"--launch-skip": "launch_skip", "-s": "launch_skip", "--launch-count": "launch_count",
             "-c": "launch_count", "--kernel-name": "kernel_filter", "-k": "kernel_filter"}
    for i, arg in enumerate(argv):
        key, _, value = arg.partition("=")
        if key in names and (value or i + 1 < len(argv)):
            val = value or argv[i + 1]
            opts[names[key]] = int(val) if names[key] != "kernel_filter" and val.isdigit() else val
        if key == "--launch-skip-before-match":
            opts["skip_before_match"] = True
        if not arg.startswith("-") and i > 0 and not argv[i - 1].startswith("-"):
            break  # the application's own arguments begin
    return opts


def _capture(header: dict[str, Any]) -> NcuCapture | None:
    """How the report chose its kernels, typed (what :mod:`kviewer.analysis.merge` decides on)."""
    if not any(k in header for k in ("launch_skip", "launch_count", "kernel_filter", "skip_before_match")):
        return None
    skip, count, kfilter = header.get("launch_skip"), header.get("launch_count"), header.get("kernel_filter")
    return NcuCapture(
        launch_skip=skip if isinstance(skip, int) else None,
        launch_count=count if isinstance(count, int) else None,
        kernel_filter=kfilter if isinstance(kfilter, str) else None,
        skip_before_match=bool(header.get("skip_before_match")),
    )


def _check_framing(path: Path, data: bytes) -> None:
    if not data.startswith(MAGIC):
        raise CorruptTrace(path, "does not start with the NVR magic of an Nsight Compute report", LABEL)
    records, end = _records(data)
    if end != len(data):
        have = len(data) - end - 4
        if have >= 0:
            (declared,) = struct.unpack_from("<I", data, end)
            what = f"the record at byte {end:,} declares {declared:,} bytes but only {have:,} follow"
        else:
            what = f"it ends at byte {len(data):,} inside a record header"
        raise TruncatedTrace(path, f"the file is cut short: {what}", LABEL)
    if len(records) < 2:
        raise TruncatedTrace(path, "the report has no results (the file is cut short or empty)", LABEL)


# ---------------------------------------------------------------------------------------------
# loading


def load(path: Path, progress: Progress, cancel: CancelToken) -> Trace:
    try:
        import ncu_report
    except ImportError as exc:
        raise MissingDependency(
            path, "reading .ncu-rep needs NVIDIA's ncu-report package, kviewer's 'ncu' extra: pip install 'kviewer[ncu]' "
            "(or pip install ncu-report); an ncu --csv export opens without it", LABEL) from exc

    tmp: Path | None = None
    try:
        if compression_of_file(path, LABEL):
            # ncu_report reads a file by name: decompress a gzip/xz/zstd copy to a temporary file
            # (streamed through the one decompression path, with its caps)
            tmp, _, truncated = decompress_to_file(path, ".ncu-rep", progress, cancel.check, LABEL)
            if truncated:
                raise TruncatedTrace(path, "the compressed stream is cut short", LABEL)
            report_path = str(tmp)
        else:
            report_path = str(path)
        data = _read_all(Path(report_path), path)
        _check_framing(path, data)
        header = header_fields(data)
        del data
        progress(0.05, "opening report")
        try:
            ctx = ncu_report.load_report(report_path)
        except Exception as exc:  # the module raises plain exceptions for damaged files
            raise CorruptTrace(path, f"ncu_report could not read it: {exc}", LABEL) from exc
        return _build(path, ctx, header, progress, cancel, ncu_report)
    finally:
        if tmp is not None:
            remove_quietly(tmp)


def _read_all(report: Path, path: Path) -> bytes:
    """The (uncompressed) report's bytes, opened as a regular file only."""
    with open_input(report, LABEL) as f:
        try:
            return f.read()
        except OSError as exc:
            raise LoadError(path, f"cannot be read ({exc.strerror or exc})", LABEL) from exc


def _build(path: Path, ctx: Any, header: dict[str, Any], progress: Progress, cancel: CancelToken, nr: Any) -> Trace:
    actions = []
    for ri in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(ri)
        for ai in range(rng.num_actions()):
            actions.append(rng.action_by_idx(ai))
    if not actions:
        raise CorruptTrace(path, "the report holds no profiled kernels", LABEL)

    M = nr.IMetric
    kinds_double = (M.ValueKind_DOUBLE, M.ValueKind_FLOAT)
    kinds_uint = (M.ValueKind_UINT32, M.ValueKind_UINT64)
    kind_string = M.ValueKind_STRING
    demangled = nr.IAction.NameBase_DEMANGLED
    units: dict[str, tuple[str, str, float]] = {}  # metric -> (printed unit, base unit, factor)

    c = nc.Collected()
    unreadable = 0  # ncu_report gives None for a string it cannot decode (a damaged report)
    for k, action in enumerate(actions):
        cancel.check()
        if k % 8 == 0:
            progress(0.05 + 0.9 * k / len(actions), f"kernel {k + 1} of {len(actions)}")
        kname = action.name(demangled) or action.name()
        if not isinstance(kname, str):
            unreadable += 1
            kname = ""
        c.launches.append(nc.KernelLaunch(name=kname))
        sections = _metric_sections(action)
        for name in action.metric_names():
            try:
                if not isinstance(name, str):
                    raise TypeError(name)
                m = action.metric_by_name(name)
            except TypeError:  # an unreadable name, or one the module cannot take back (a NUL in it)
                unreadable += 1
                continue
            if m is None:
                continue
            kind = m.kind()
            if kind in kinds_double:
                v = m.as_double()
                value, text = v, repr(v)
            elif kind in kinds_uint:
                iv = m.as_uint64()
                value, text = float(iv), str(iv)
            elif kind == kind_string:
                value, text = math.nan, m.as_string() or ""
            else:  # no value collected
                value, text = math.nan, ""
            u = units.get(name)
            if u is None:
                printed = m.unit() or ""
                base, factor = nc.parse_unit(printed)
                u = units[name] = (printed, base, factor)
            if u[2] != 1.0:
                value *= u[2]
            c.add(k, sections.get(name, ""), name, u[1], value, text)
        for rule in action.rule_results():
            msg: dict[str, Any] = rule.rule_message() if rule.has_rule_message() else {"message": "", "type": 0}
            sp: dict[str, Any] = rule.speedup_estimation() if rule.has_speedup_estimation() else {"type": 0, "speedup": math.nan}
            row = nc.rule_row(
                rule.rule_identifier() or "",
                nc.RULE_TYPES.get(int(msg["type"]), ""),
                nc.render_rule_message(msg["message"] or ""),
                nc.SPEEDUP_TYPES.get(int(sp["type"]), "") if rule.has_speedup_estimation() else "",
                float(sp["speedup"]),
            )
            c.add(k, *row)
        _nvtx_rows(c, k, action)

    progress(0.96, "building tables")
    wide = c.wide()
    kernels, warnings = nc.kernels_table(path, c, wide)
    if unreadable:
        warnings.append(Diagnostic.warning("damaged", path, f"{unreadable} kernel or metric names could not be read (the report looks damaged)"))
    devices = nc.devices_table(c, wide)
    extra: dict[str, Any] = {"kernels profiled": len(actions)}
    if header.get("command"):
        extra["command"] = header["command"]
    for key in ("launch_skip", "launch_count", "kernel_filter"):
        if key in header:
            extra[key] = header[key]
    fmt = header.get("format_version")
    meta = TraceMeta(
        path=str(path),
        source_format="ncu-rep",
        format_label=f"{LABEL}, report format {fmt}" if fmt else LABEL,
        tool=nc.TOOL,
        tool_version=str(header.get("tool_version", "")),
        warnings=warnings,
        extra=extra,
        ncu_capture=_capture(header),
    )
    return Trace(meta=meta, kernels=kernels, devices=devices, metrics=nc.metrics_table(c))


def _metric_sections(action: Any) -> dict[str, str]:
    """metric name -> display name of the first section (by section order) that shows it."""
    out: dict[str, str] = {}
    try:
        sections = sorted(action.sections(), key=lambda s: s.order())
    except Exception:  # reports written before sections were stored
        return out
    for s in sections:
        name = s.name() or ""
        for m in (*s.header_metrics(), *s.body_metrics()):
            out.setdefault(m.name(), name)
    return out


def _nvtx_rows(c: nc.Collected, k: int, action: Any) -> None:
    state = action.nvtx_state()
    if state is None:
        return
    for dom_id in state.domains():
        dom = state.domain_by_id(dom_id)
        stack = [dom.push_pop_range(i).name() or "" for i in range(len(dom.push_pop_ranges()))]
        ranges = [dom.start_end_range(i).name() or "" for i in range(len(dom.start_end_ranges()))]
        if not stack and not ranges:
            continue
        text = "/".join(stack)
        if ranges:
            text = "; ".join(([text] if text else []) + ranges)
        c.add(k, "nvtx", dom.name() or "", "", math.nan, text)


LOADER = LoaderSpec(name="ncu-rep", label=LABEL, priority=60, sniff=sniff, load=load)

__all__ = ["LOADER", "header_fields", "load", "sniff"]
