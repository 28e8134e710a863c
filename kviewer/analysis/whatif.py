"""What-if projections: transform the dependency graph, replay it, read the new step times.

Each change edits durations or edges of the graph of :mod:`kviewer.analysis.depgraph`; the replay
keeps every other dependency, so a shorter kernel only helps a step where it was on the critical
path, and removed launch overhead only helps where the host gated the GPU.

``fuse``         the fusion candidates (all, or by the rank ``kviewer fusion`` prints) become one
                 kernel per instance at the candidate's estimated fused time (shared across
                 instances by their measured time); the other members (an unfused attention's
                 layout copies with them), their launch calls and the host work just before those
                 calls (the framework op that launched them) go away
``cuda_graphs``  in every step, the host calls from the first to the last launch of the step
                 (and the host work between them) collapse into one graph launch
                 (the trace's own median ``cudaGraphLaunch``, else :data:`GRAPH_LAUNCH_NS` plus
                 :data:`GRAPH_LAUNCH_PER_NODE_NS` a kernel it releases); the
                 kernels keep their GPU durations and are all released by that launch; syncs stay
``sol``          kernels of a kind run at PCT % of their speed of light (never slower than measured;
                 unknown speed of light: unchanged)
``no_sync``      host syncs (all, or those of the named API calls) no longer wait for the GPU
``kernel``       kernels whose name or short name is NAME (else contains it) run FACTOR times as long
``channels_last`` the layout transforms a library runs around each convolution (helper copy kernels of
                 a conv op: cuDNN's nchwToNhwc / nhwcToNchw, MIOpen's transposes) go away, with their
                 launch calls: the activations and weights are already in the layout the convolution
                 kernel reads (``channels_last``, which torch.compile picks for convolutions). An op
                 eager PyTorch runs only in NCHW (:data:`kinds.EAGER_NCHW_OPS`: GroupNorm, InstanceNorm,
                 pixel_shuffle) and that is not in a fused chain then copies its input to NCHW (the
                 norms) and the convolution after it copies back (not an add, which reads the NCHW
                 tensor in its own kernel): the copies of the op's output's size, added to the op's
                 first kernel at the fraction of their speed of light PyTorch's strided copies ran at
                 on an H100 (:data:`PERMUTED_COPY_EFFICIENCY`, 16-21 % for 2-byte elements; the time
                 follows the elements, not the bytes: :func:`permuted_copy_ns`)

With no change the projection reproduces the measured steps (the replay is exact).
:meth:`Projection.projected_step_ns` is the hook other analyses (MFU at the projected step time)
read.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from kviewer.analysis.critpath import (
    CritPathResult,
    StepPath,
    StepWindow,
    check_graph,
    step_bounds,
    step_windows,
    summarise,
    walk,
    walk_lists,
)
from kviewer.analysis.depgraph import H_SYNC, DepGraph, Edits, Replay, build_graph, map_host_times, replay
from kviewer.analysis.fusion import fusion_candidates
from kviewer.analysis.kinds import EAGER_NCHW_OPS, KINDS, classify, enclosing_op_rows, op_base, op_kind
from kviewer.analysis.model import _parse, _Tensor, _tensors
from kviewer.analysis.sol import speed_of_light
from kviewer.core import Trace, Trace as _Trace
from kviewer.errors import AnalysisError

if TYPE_CHECKING:
    from kviewer.analysis.sol import SolResult

#: the host cost of one CUDA graph launch when the trace has none to measure: GRAPH_LAUNCH_NS plus
#: GRAPH_LAUNCH_PER_NODE_NS for each kernel node the graph releases. A least-squares line through
#: ``tests/bench/device/graph_launch_cost.py`` on an H100 (torch 2.11, CUDA 13, no profiler): 2.7 us
#: for 1 node, 8.3 us for 16, 54.5 us for 256, 103.4 us for 512 (within 6 us of the line). Under
#: torch.profiler the same launches take about 4x as long (0.82 us a node), so a trace that has
#: its own cudaGraphLaunch calls is measured instead.
GRAPH_LAUNCH_NS = 5_800
GRAPH_LAUNCH_PER_NODE_NS = 190
#: the device-side gap between consecutive kernels of one CUDA graph when the trace has no graph to
#: measure it from (about 0.3 us on Hopper; the H200 graph replay in sample_traces/mlp_graph
#: shows 0.27 us: 68.0 us span, 61.5 us busy, 25 ops)
GRAPH_KERNEL_GAP_NS = 300
#: how many ops after an op of :data:`EAGER_NCHW_OPS` are read for the op that takes its output
NCHW_CONSUMER_LOOKAHEAD = 16
#: the fraction of its speed of light (the tensor read and written at the GPU's DRAM bandwidth) at
#: which PyTorch's strided copy between channels_last and NCHW (``elementwise_kernel<128, 4>`` of
#: ``direct_copy_kernel_cuda`` over permuted strides) runs: the copy into NCHW an op of
#: :data:`EAGER_NCHW_OPS` makes of its input (``"to_nchw"``), and the copy back a convolution makes
#: of its output (``"to_cl"``). Fitted on one program only, round 7's GroupNorm blocks converted to
#: channels_last on an H100 (``sample_traces/h100_r7_clgn_cl``, fp16, 64 x 128 x 64 x 64, 64 MiB
#: a copy: 247.6 us into NCHW, 191.2 us back, where 3.35 TB/s allows 40.1 us); round 9's two
#: programs, not used in the fit, ran 16.2 % / 21.1 % (InstanceNorm, fp16, C = 128) and 26.7-27.5 %
#: (the copies back after PixelShuffle, fp16, C = 64). The fractions are for 2-byte elements: the
#: copy's time follows its elements, not its bytes (:func:`permuted_copy_ns`). Channel counts and
#: other GPUs are assumed to run at the same fractions
PERMUTED_COPY_EFFICIENCY = {"to_nchw": 40.06 / 247.6, "to_cl": 40.06 / 191.2}
#: the element size the fractions above were fitted at (fp16)
PERMUTED_COPY_FIT_ITEMSIZE = 2


def permuted_copy_ns(nbytes: np.ndarray, itemsize: np.ndarray, bw: np.ndarray, into: np.ndarray, back: np.ndarray) -> np.ndarray:
    """The time (ns) of ``into`` copies into NCHW and ``back`` copies back to channels_last of a
    tensor of ``nbytes`` (``itemsize`` bytes an element; NaN: unknown, taken as the fitted 2 bytes)
    on a GPU of DRAM bandwidth ``bw`` (bytes/s). PyTorch's permuted copy is bound by its index
    arithmetic per element, not by DRAM: on an H100 an fp32 copy took 0.96-1.31x the time of the fp16
    copy of the same shape (once 1.99x), where its bytes would give 2x
    (``tests/bench/device/permuted_copy_rates_h100.json``).
    So a copy of N elements of any dtype takes what N 2-byte elements take at
    :data:`PERMUTED_COPY_EFFICIENCY`, and never less than its own speed of light (the tensor read and
    written at ``bw``). Unknown bytes or bandwidth give NaN."""
    at_sol = 2 * np.asarray(nbytes, np.float64) / np.asarray(bw, np.float64) * 1e9
    size = np.asarray(itemsize, np.float64)
    per_element = at_sol * PERMUTED_COPY_FIT_ITEMSIZE / np.where(np.isfinite(size) & (size > 0), size, PERMUTED_COPY_FIT_ITEMSIZE)
    into, back = np.asarray(into, np.float64), np.asarray(back, np.float64)
    ns = per_element * (into / PERMUTED_COPY_EFFICIENCY["to_nchw"] + back / PERMUTED_COPY_EFFICIENCY["to_cl"])
    return np.maximum(ns, at_sol * (into + back))


@dataclass(frozen=True)
class Changes:
    """A set of what-if changes (see the module doc); empty = the measured run."""

    fuse: tuple[int, ...] | None = None
    """candidate ranks to fuse; () = all candidates; None = no fusion"""
    cuda_graphs: bool = False
    sol: tuple[tuple[str, float], ...] = ()
    no_sync: tuple[str, ...] | None = None
    """API names of the syncs to remove; () = all; None = keep them"""
    kernel: tuple[tuple[str, float], ...] = ()
    channels_last: bool = False

    @property
    def empty(self) -> bool:
        return (self.fuse is None and not self.cuda_graphs and not self.sol and self.no_sync is None and not self.kernel
                and not self.channels_last)

    @property
    def reads_tables(self) -> bool:
        """True when a change reads the trace's tables (kernel names, the speed of light, fusion
        candidates, the ops around syncs); False when the graph alone projects them (none, or
        ``cuda_graphs``), so a cached graph needs no trace (:class:`WhatIfModel` ``trace`` None)."""
        return self.fuse is not None or bool(self.sol) or self.no_sync is not None or bool(self.kernel) or self.channels_last

    def label(self) -> str:
        """The changes as CLI options (how the report and the window name a projection)."""
        parts: list[str] = []
        if self.fuse is not None:
            parts.append("--fuse " + (",".join(str(i) for i in self.fuse) if self.fuse else "all"))
        if self.cuda_graphs:
            parts.append("--cuda-graphs")
        parts += [f"--sol {k}={_num(p)}" for k, p in self.sol]
        if self.no_sync is not None:
            parts += [f"--no-sync {n}" for n in self.no_sync] if self.no_sync else ["--no-sync"]
        parts += [f"--kernel {n}={_num(f)}" for n, f in self.kernel]
        if self.channels_last:
            parts.append("--channels-last")
        return " ".join(parts) or "(measured)"


def _num(x: float) -> str:
    return f"{x:g}"


def parse_assignment(text: str, what: str) -> tuple[str, float]:
    """``KEY=NUMBER`` (``--sol gemm=80``, ``--kernel NAME=0.5``); UserError-worthy AnalysisError."""
    key, sep, value = text.rpartition("=")
    try:
        num = float(value)
    except ValueError:
        num = math.nan
    if not sep or not key or not math.isfinite(num):
        raise AnalysisError(f"{what}: expected NAME=NUMBER, got {text!r}")
    return key, num


@dataclass(frozen=True)
class StepProjection:
    name: str
    measured_ns: int
    projected_ns: int


@dataclass(frozen=True)
class Projection:
    """Measured and projected time of every step under one set of changes."""

    changes: Changes
    steps: list[StepProjection]
    notes: list[dict[str, object]]
    """what each change did: {"change", "what", "count"}"""
    replayed: Replay = field(repr=False)
    bounds: list[tuple[int, int]] = field(repr=False)
    launch: np.ndarray | None = field(default=None, repr=False)
    """the launch edge of every GPU op in the projection (None: as measured)"""

    def projected_step_ns(self) -> np.ndarray:
        """Projected time of each step (ns), in step order: the hook for MFU at the projected time."""
        return np.asarray([s.projected_ns for s in self.steps], dtype=np.int64)

    @property
    def median_measured_ns(self) -> float:
        return float(np.median([s.measured_ns for s in self.steps])) if self.steps else math.nan

    @property
    def median_projected_ns(self) -> float:
        return float(np.median([s.projected_ns for s in self.steps])) if self.steps else math.nan

    def as_dict(self) -> dict[str, object]:
        return {
            "steps": [{"name": s.name, "measured_ns": s.measured_ns, "projected_ns": s.projected_ns} for s in self.steps],
            "median_measured_ns": self.median_measured_ns,
            "median_projected_ns": self.median_projected_ns,
            "changes": list(self.notes),
        }


@dataclass
class WhatIfModel:
    """A trace's graph, steps and (lazily) speed of light and fusion candidates: project many
    change sets without rebuilding them (the window ticks options one at a time).

    ``trace`` None: the graph came from a cache without the trace (``kviewer whatif
    --cuda-graphs`` on a file seen before); only changes that read no table project then
    (:attr:`Changes.reads_tables`)."""

    trace: Trace | None
    graph: DepGraph
    windows: list[StepWindow]
    measured: Replay
    measured_bounds: list[tuple[int, int]]
    device: str | None = None
    _sol: pd.DataFrame | None = None
    _fusion: pd.DataFrame | None = None
    _layout: np.ndarray | None = None
    _classes: pd.DataFrame | None = None

    def tables(self) -> Trace:
        """The trace the graph was built from (a change reading its tables needs it)."""
        if self.trace is None:
            raise AnalysisError("this what-if model was made from a cached graph without the trace: load the trace "
                                "to project a change that reads its tables")
        return self.trace

    def sol_table(self) -> pd.DataFrame:
        if self._sol is None:
            self._sol = speed_of_light(self.tables(), self.device)
        return self._sol

    def fusion_table(self) -> pd.DataFrame:
        if self._fusion is None:
            self._fusion = fusion_candidates(self.tables(), self.device, sol=self.sol_table())
        return self._fusion

    def project(self, changes: Changes) -> Projection:
        edits, notes = self.edits(changes)
        rep = replay(self.graph, edits) if not changes.empty else self.measured
        bounds = step_bounds(self.graph, rep, self.windows)
        steps = [StepProjection(w.name, m[1] - m[0], p[1] - p[0]) for w, m, p in zip(self.windows, self.measured_bounds, bounds)]
        launch = np.where(edits.g_launch_ready >= 0, edits.g_launch_ready, self.graph.g_launch) if edits.g_launch_ready is not None else None
        return Projection(changes, steps, notes, rep, bounds, launch)

    def paths(self, projection: Projection) -> list[StepPath]:
        """The critical path of every step of a projection (the projected timeline's breakdown)."""
        lists = walk_lists(self.graph, projection.replayed, projection.launch)
        return [summarise(w.name, lo, hi, walk(self.graph, projection.replayed, w, (lo, hi), lists=lists), self.graph,
                          rep=projection.replayed)
                for w, (lo, hi) in zip(self.windows, projection.bounds)]

    # -------------------------------------------------------------------------------------
    def edits(self, ch: Changes) -> tuple[Edits, list[dict[str, object]]]:
        g = self.graph
        g_dur = g.g_dur.astype(np.float64)
        g_removed = np.zeros(g.n_gpu, dtype=bool)
        h_dur = g.h_dur.copy()
        h_gap = g.h_gap.copy()
        nowait = np.zeros(g.n_host, dtype=bool)
        launch_to = np.full(g.n_gpu, -1, dtype=np.int64)
        l_lat = g.g_launch_lat.copy()
        s_lat = g.g_stream_lat.copy()
        x_lat = g.h_xlat.copy() if len(g.h_xlat) == g.n_host else np.zeros(g.n_host, dtype=np.int64)
        notes: list[dict[str, object]] = []
        is_kernel = g.g_table == 0
        fused = np.zeros(g.n_gpu, dtype=bool)
        if ch.kernel:
            # the kernels' full names; gpu_ops nodes (copies, memsets) index another table: no name
            full = np.full(g.n_gpu, "", dtype=object)
            full[is_kernel] = self.tables().kernels["name"].astype(str).to_numpy()[g.g_row[is_kernel]]
            for name, factor in ch.kernel:
                if factor < 0:
                    raise AnalysisError(f"--kernel {name}={factor:g}: the factor must be >= 0")
                hit = is_kernel & ((full == name) | (g.g_name.astype(str) == name))
                if not hit.any():
                    hit = is_kernel & np.array([name in f for f in full], dtype=bool)
                if not hit.any():
                    raise AnalysisError(f"--kernel: no kernel is named {name!r} (or contains it)")
                g_dur[hit] *= factor
                notes.append({"change": f"--kernel {name}={factor:g}", "what": f"{int(hit.sum())} kernel(s) x {factor:g}",
                              "count": int(hit.sum())})
        if ch.sol:
            sol = self.sol_table()
            kind = sol["kind"].astype(str).to_numpy()
            t_sol = sol["t_sol_ns"].to_numpy(np.float64)
            for k, pct in ch.sol:
                if k not in KINDS:
                    raise AnalysisError(f"--sol {k}={pct:g}: unknown kind; the kinds are {', '.join(KINDS)}")
                if not 0 < pct <= 100:
                    raise AnalysisError(f"--sol {k}={pct:g}: the percentage of speed of light must be in (0, 100]")
                rows = g.g_row[is_kernel]
                nodes = np.flatnonzero(is_kernel)
                sel = (kind[rows] == k) & np.isfinite(t_sol[rows])
                target = t_sol[rows[sel]] / (pct / 100.0)
                n = nodes[sel]
                g_dur[n] = np.minimum(g_dur[n], target)
                unknown = int(((kind[rows] == k) & ~np.isfinite(t_sol[rows])).sum())
                notes.append({"change": f"--sol {k}={pct:g}", "count": int(sel.sum()),
                              "what": f"{int(sel.sum())} {k} kernel(s) at {pct:g}% of speed of light (never slower than measured)"
                              + (f"; {unknown} without a known speed of light unchanged" if unknown else "")})
        if ch.fuse is not None:
            self._fuse(ch.fuse, g_dur, g_removed, h_dur, h_gap, fused, notes)
        if ch.channels_last:
            self._channels_last(g_dur, g_removed, h_dur, fused, notes)
        if ch.no_sync is not None:
            self._no_sync(ch.no_sync, nowait, h_dur, h_gap, g_removed, notes)
        if ch.cuda_graphs:
            self._graphs(h_dur, h_gap, launch_to, l_lat, s_lat, x_lat, notes)
        edits = Edits(g_dur=np.round(g_dur).astype(np.int64), g_removed=g_removed, h_dur=h_dur, h_gap=h_gap, h_nowait=nowait,
                      g_launch_ready=launch_to, g_launch_lat=l_lat, g_stream_lat=s_lat, h_xlat=x_lat)
        return edits, notes

    def _fuse(self, ranks: tuple[int, ...], g_dur: np.ndarray, g_removed: np.ndarray, h_dur: np.ndarray, h_gap: np.ndarray,
              fused_nodes: np.ndarray, notes: list[dict[str, object]]) -> None:
        """Fuse the candidates; ``fused_nodes`` is set where a node became part of a fused kernel."""
        g = self.graph
        cand = self.fusion_table()
        if ranks:
            missing = sorted(set(ranks) - set(cand["rank"].astype(int).tolist()))
            if missing:
                raise AnalysisError(f"--fuse: no fusion candidate {', '.join(map(str, missing))} (there are {len(cand)}; see kviewer fusion)")
            cand = cand[cand["rank"].isin(ranks)]
        kdur = self.tables().kernels["dur"].to_numpy(np.float64)
        used = chains = 0
        saved = 0.0
        skipped = 0
        for fused, measured, instances in zip(cand["fused_est_ns"].tolist(), cand["measured_ns"].tolist(), cand["kernel_ids"].tolist()):
            if not (isinstance(fused, float) and math.isfinite(fused)) or measured <= 0:
                skipped += 1
                continue
            chains += 1
            for ids in instances:
                ids = np.asarray(ids, dtype=np.int64)
                nodes = g.kernel_node[ids]
                if (nodes < 0).any():
                    continue
                share = float(kdur[ids].sum()) / measured
                before = float(g_dur[nodes].sum())
                g_dur[nodes[0]] = min(fused * share, before)
                g_dur[nodes[1:]] = 0.0
                g_removed[nodes[1:]] = True
                fused_nodes[nodes] = True
                saved += before - float(g_dur[nodes[0]])
                launches = g.g_launch[nodes[1:]]
                launches = launches[launches >= 0]
                # the member's launch call and the framework op before it go with the kernel
                h_dur[launches] = 0
                h_gap[launches] = 0
                used += 1
        what = f"{chains} candidate(s), {used} chain instance(s) fused: {saved / 1e6:.3f} ms of kernel time removed"
        if skipped:
            what += f"; {skipped} candidate(s) without an estimate left as they are"
        notes.append({"change": "--fuse " + (",".join(map(str, ranks)) if ranks else "all"), "what": what, "count": used})

    def layout_kernels(self) -> np.ndarray:
        """Graph nodes of the layout transforms around convolutions: copy kernels that are helpers
        of a convolution op (decided by :func:`kviewer.analysis.kinds.classify`), classified once per
        model (the report projects them alone and with every other change)."""
        if self._layout is None:
            g = self.graph
            cls = self.classes()
            hit = (cls["helper"].to_numpy(bool) & (cls["kind"].astype(str).to_numpy() == "copy")
                   & (cls["op_kind"].astype(str).to_numpy() == "conv"))
            nodes = np.flatnonzero(g.g_table == 0)
            self._layout = nodes[hit[g.g_row[nodes]]]
        return self._layout

    def classes(self) -> pd.DataFrame:
        """:func:`kviewer.analysis.kinds.classify` of the trace's kernels, once per model."""
        if self._classes is None:
            self._classes = classify(self.tables())
        return self._classes

    def _channels_last(self, g_dur: np.ndarray, g_removed: np.ndarray, h_dur: np.ndarray, fused: np.ndarray,
                       notes: list[dict[str, object]]) -> None:
        g = self.graph
        nodes = self.layout_kernels()
        saved = float(g_dur[nodes].sum())
        g_dur[nodes] = 0.0
        g_removed[nodes] = True
        launches = g.g_launch[nodes]
        # the transform's launch call goes; the convolution op's own host time around it stays
        h_dur[launches[launches >= 0]] = 0
        what = f"{len(nodes)} layout transform kernel(s) around convolutions removed: {saved / 1e6:.3f} ms of kernel time"
        note: dict[str, object] = {"change": "--channels-last", "count": len(nodes)}
        if len(nodes):
            ops, added, unknown, which, kept = self._nchw_copies(g_dur, fused)
            if ops:
                note["nchw_ops"] = ops
                both = [b for b in which if EAGER_NCHW_OPS[b] > 1]
                what += (f"; {ops} {'/'.join(which)} op(s), which eager PyTorch runs only in NCHW: each writes NCHW, so the "
                         "convolution after it copies back" + (f", and {'/'.join(both)} copy their input to NCHW first" if both else ""))
                if kept:
                    what += (f"; {kept} of them feed no convolution (an add reads their NCHW output in its own kernel, "
                             "or another op wants NCHW): no copy back counted for those")
                    note["not_copied_back"] = kept
                if added:
                    what += (f": {added / 1e6:.3f} ms of copies added, at the rate PyTorch's strided copies ran on an H100 "
                             f"({PERMUTED_COPY_EFFICIENCY['to_nchw'] * 100:.0f} % of their speed of light into NCHW, "
                             f"{PERMUTED_COPY_EFFICIENCY['to_cl'] * 100:.0f} % back, for 2-byte elements; the time follows "
                             "the elements, not the bytes), assumed for this GPU")
                if unknown:
                    what += f"; the copies of {unknown} of them have no speed of light (unknown GPU or bytes): nothing added"
                what += "; torch.compile, or a fused kernel, runs no such copy"
        note["what"] = what
        notes.append(note)

    def _nchw_copies(self, g_dur: np.ndarray, fused: np.ndarray) -> tuple[int, float, int, list[str], int]:
        """Under channels_last, each instance of an op of :data:`EAGER_NCHW_OPS` (the outermost such op
        holding a kernel's launching op: ``aten::instance_norm`` launches through ``aten::batch_norm``)
        none of whose kernels was fused adds copies of its output's size to its first kernel: its
        input copied to NCHW (the norms), and its NCHW output copied back where a convolution takes it
        (:meth:`_copied_back_and_itemsize`), each at the fraction of its speed of light (read and write the tensor
        at the GPU's bandwidth) :data:`PERMUTED_COPY_EFFICIENCY` gives. Returns the ops, the ns added, the ops whose bandwidth or bytes are unknown
        (nothing added for them), the ops' names and the ops whose output no copy takes back."""
        g = self.graph
        cls = self.classes()
        c = self.tables().cpu_slices
        holder = enclosing_op_rows(self.tables(), cls["op_row"].to_numpy(np.int64), EAGER_NCHW_OPS)
        hit = np.flatnonzero(holder >= 0)
        node = g.kernel_node[hit]
        hit, node = hit[node >= 0], node[node >= 0]
        if not len(hit):
            return 0, 0.0, 0, [], 0
        op_row = holder[hit]
        try:
            sol = self.sol_table()
            written = sol["bytes_written"].to_numpy(np.float64)[hit]
            bw = sol["peak_bw"].to_numpy(np.float64)[hit]
        except AnalysisError:  # the GPU is unknown: no speed of light, the copies' time unknown
            written = bw = np.full(len(hit), np.nan)
        frame = pd.DataFrame({"op": op_row, "node": node, "written": written, "nan": np.isnan(written), "bw": bw,
                              "fused": fused[node], "start": g.g_start[node]})
        per = frame.sort_values(["op", "start"]).groupby("op", sort=False).agg(
            first=("node", "first"), written=("written", "sum"), nan=("nan", "any"), bw=("bw", "first"), fused=("fused", "any"))
        per = per[~per["fused"].to_numpy()]
        rows = per.index.to_numpy(np.int64)
        base = [op_base(str(n)) for n in c["name"].take(rows)]
        back, itemsize = self._copied_back_and_itemsize(rows)
        into = np.array([EAGER_NCHW_OPS[b] - 1 for b in base], dtype=np.float64)
        ns = permuted_copy_ns(per["written"].to_numpy(), itemsize, per["bw"].to_numpy(), into, back)
        ns = np.where(per["nan"].to_numpy(), np.nan, ns)
        known = np.isfinite(ns)
        np.add.at(g_dur, per["first"].to_numpy(np.int64)[known], ns[known])
        return len(per), float(ns[known].sum()), int((~known).sum()), sorted(set(base)), int((~back).sum())

    def _copied_back_and_itemsize(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each op of :data:`EAGER_NCHW_OPS` (``cpu_slices`` rows): whether a copy kernel takes its
        NCHW output back to channels_last, and the element size of its first tensor (NaN: unknown).
        The ops after it on its thread (at its depth or above) are read in order: an elementwise op
        of one tensor input keeps the layout and is passed over; a convolution taking a tensor of the op's size copies it back (PyTorch 2.11: ``aten::conv2d`` ->
        ``aten::contiguous``); any other op (an add with a channels_last tensor, which reads it
        strided in its own kernel, or another op of the list, which wants NCHW) launches no copy:
        ``x + instance_norm(...)`` in ``sample_traces/h100_r9_clin_cl`` copies nothing back. Where
        the trace has no input shapes, the copy is counted."""
        out = np.ones(len(rows), dtype=bool)
        size = np.full(len(rows), np.nan)
        c = self.tables().cpu_slices
        if not len(rows) or "input_dims" not in c or "input_types" not in c:
            return out, size
        cat = (c["category"].astype(str) == "op").to_numpy()
        key = pd.MultiIndex.from_arrays([c["rank"].to_numpy(np.int64), c["pid"].to_numpy(np.int64), c["tid"].to_numpy(np.int64)])
        thread, _ = pd.factorize(key)
        start, end, depth = c["start"].to_numpy(np.int64), c["end"].to_numpy(np.int64), c["depth"].to_numpy(np.int64)
        names = c["name"].astype(str).to_numpy()
        dims, types = c["input_dims"].astype(str).to_numpy(), c["input_types"].astype(str).to_numpy()
        order = np.flatnonzero(cat)
        order = order[np.lexsort((start[order], thread[order]))]
        at_thread = thread[order]

        def tensors(r: int) -> list[_Tensor]:
            return [t for t in _tensors(_parse(dims[r]), _parse(types[r])) if t is not None]

        for i, r in enumerate(rows.tolist()):
            own = tensors(r)
            if not own:
                continue  # no shapes: counted
            size[i] = own[0].itemsize
            lo, hi = np.searchsorted(at_thread, thread[r], "left"), np.searchsorted(at_thread, thread[r], "right")
            mine = order[lo:hi]
            after = mine[np.searchsorted(start[mine], end[r], "left"):]
            after = after[depth[after] <= depth[r]][:NCHW_CONSUMER_LOOKAHEAD]
            verdict = False
            for j in after.tolist():
                kind, b = op_kind(names[j]), op_base(names[j])
                theirs = tensors(j)
                if kind == "elementwise" and len(theirs) == 1 and b not in EAGER_NCHW_OPS:
                    continue
                verdict = kind == "conv" and (not theirs or theirs[0].numel == own[0].numel)
                break
            out[i] = verdict
        return out, size

    def _sync_ops(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For each host sync node: the framework op that issued it (cpu_slices row, -1), and that
        op's start and end. The op is the outermost ``op`` range on the sync's thread holding the
        call whose other calls launch no kernel (``aten::item`` holding a copy and a stream sync;
        not ``aten::nonzero``, whose kernels the program still needs)."""
        g = self.graph
        c = self.tables().cpu_slices
        sync = np.flatnonzero(g.h_class == H_SYNC)
        rows = np.full(len(sync), -1, dtype=np.int64)
        if not len(sync) or not len(c):
            return sync, rows, rows
        cat = c["category"].astype(str).to_numpy()
        ops = np.flatnonzero(cat == "op")
        pid, tid = c["pid"].to_numpy(np.int64), c["tid"].to_numpy(np.int64)
        cs, ce, depth = c["start"].to_numpy(np.int64), c["end"].to_numpy(np.int64), c["depth"].to_numpy(np.int64)
        launches_kernel = np.zeros(g.n_host, dtype=bool)
        launches_kernel[g.g_launch[(g.g_launch >= 0) & (g.g_table == 0)]] = True
        for i, j in enumerate(sync.tolist()):
            p, t = g.threads[g.h_thread[j]]
            s, e = g.h_start[j], g.h_end[j]
            hold = ops[(pid[ops] == p) & (tid[ops] == t) & (cs[ops] <= s) & (ce[ops] >= e)]
            for r in hold[np.argsort(depth[hold], kind="stable")].tolist():
                lo = g.host_node_at(g.h_thread[j], int(cs[r]))
                inside = np.arange(max(lo, 0), g.host_node_at(g.h_thread[j], int(ce[r])) + 1)
                inside = inside[(g.h_start[inside] >= cs[r]) & (g.h_end[inside] <= ce[r])]
                if not launches_kernel[inside].any():
                    rows[i] = r
                    break
        starts = np.where(rows >= 0, cs[np.maximum(rows, 0)], -1)
        ends = np.where(rows >= 0, ce[np.maximum(rows, 0)], -1)
        return sync, rows, np.stack([starts, ends])

    def _no_sync(self, names: tuple[str, ...], nowait: np.ndarray, h_dur: np.ndarray, h_gap: np.ndarray, g_removed: np.ndarray,
                 notes: list[dict[str, object]]) -> None:
        g = self.graph
        sync, rows, span = self._sync_ops()
        opname = np.where(rows >= 0, self.tables().cpu_slices["name"].astype(str).to_numpy()[np.maximum(rows, 0)], "") if len(sync) else np.zeros(0, dtype=object)
        pick = np.ones(len(sync), dtype=bool)
        if names:
            pick = np.isin(g.h_name[sync].astype(str), list(names)) | np.isin(opname.astype(str), list(names))
            if not pick.any():
                have = sorted(set(g.h_name[sync].astype(str)) | {str(o) for o in opname if o})
                raise AnalysisError(f"--no-sync {' '.join(names)}: no such sync call or op in the trace"
                                    + (f" (it has {', '.join(have)})" if have else " (it has none)"))
        removed_ops = 0
        for i in np.flatnonzero(pick).tolist():
            j = int(sync[i])
            nowait[j] = True
            if rows[i] < 0:
                continue
            # the op that synchronised goes with its sync: its calls, their copies and its host time
            removed_ops += 1
            self._remove_host_time(int(g.h_thread[j]), int(span[0][i]), int(span[1][i]), h_dur, h_gap, g_removed)
        label = "--no-sync" + "".join(f" {n}" for n in names)
        notes.append({"change": label, "count": int(pick.sum()),
                      "what": f"{int(pick.sum())} host sync call(s) no longer wait for the GPU; {removed_ops} of them issued by a "
                              "framework op (e.g. aten::item) that goes with its host time and its copy"})

    def _remove_host_time(self, thread: int, a: int, b: int, h_dur: np.ndarray, h_gap: np.ndarray, g_removed: np.ndarray | None) -> None:
        """Take the host interval [a, b] of one thread out of the replay (calls, gaps, and what they
        launched when ``g_removed`` is given)."""
        g = self.graph
        lo = int(np.searchsorted(g.h_thread, thread, "left"))
        hi = int(np.searchsorted(g.h_thread, thread, "right"))
        # the thread's nodes are by start: only those from the one holding a to the first after b
        # (whose gap before it may overlap) are touched
        starts = g.h_start[lo:hi]
        i0 = lo + max(int(np.searchsorted(starts, a, "right")) - 1, 0)
        i1 = lo + min(int(np.searchsorted(starts, b, "right")) + 1, hi - lo)
        idx = np.arange(i0, i1)
        s, e = g.h_start[idx], g.h_end[idx]
        prev_end = np.where(g.h_prev[idx] >= 0, g.h_end[np.maximum(g.h_prev[idx], 0)], s)
        node_cut = np.clip(np.minimum(e, b) - np.maximum(s, a), 0, None)
        gap_cut = np.clip(np.minimum(s, b) - np.maximum(prev_end, a), 0, None)
        h_dur[idx] = np.maximum(h_dur[idx] - node_cut, 0)
        h_gap[idx] = np.maximum(h_gap[idx] - gap_cut, 0)
        if g_removed is not None:
            g_removed |= np.isin(g.g_launch, idx[(s >= a) & (e <= b)])

    def _graphs(self, h_dur: np.ndarray, h_gap: np.ndarray, launch_to: np.ndarray, l_lat: np.ndarray, s_lat: np.ndarray,
                x_lat: np.ndarray, notes: list[dict[str, object]]) -> None:
        g = self.graph
        names = g.h_name.astype(str)
        own = np.char.startswith(names.astype(str), "cudaGraphLaunch") | np.char.startswith(names.astype(str), "hipGraphLaunch")
        measured = int(np.median(g.h_dur[own])) if own.any() else None
        costs: list[int] = []
        graph_ops = np.isin(g.g_launch, np.flatnonzero(own)) & (g.g_prev >= 0)
        gaps = (g.g_start - g.g_end[np.maximum(g.g_prev, 0)])[graph_ops & np.isin(g.g_prev, np.flatnonzero(graph_ops | np.isin(g.g_launch, np.flatnonzero(own))))]
        gap = int(np.median(gaps)) if len(gaps) else GRAPH_KERNEL_GAP_NS
        collapsed = 0
        for win in self.windows:
            ops = win.gpu[g.g_launch[win.gpu] >= 0]
            if not len(ops):
                continue
            calls = g.g_launch[ops]
            for t in np.unique(g.h_thread[calls]).tolist():
                mine = calls[g.h_thread[calls] == t]
                first, last = int(mine.min()), int(mine.max())
                if t == win.thread:
                    # the step's whole host range becomes the replay of the graph
                    lo = int(np.searchsorted(g.h_thread, t, "left"))
                    hi = int(np.searchsorted(g.h_thread, t, "right"))
                    starts = g.h_start[lo:hi]  # by start within the thread
                    span = np.arange(lo + int(np.searchsorted(starts, win.marker_start, "left")),
                                     lo + int(np.searchsorted(starts, win.marker_end, "right")))
                    span = span[g.h_end[span] <= win.marker_end]
                    if len(span):
                        first, last = min(first, int(span[0])), max(last, int(span[-1]))
                region = np.arange(first, last + 1)
                body = region[g.h_class[region] != H_SYNC]
                h_dur[body] = 0
                h_gap[body[body != first]] = 0
                x_lat[body] = 0  # the host work around a handoff between threads goes too
                if t == win.thread:
                    # the step's host work before its first call and after its last goes too;
                    # what ran between the steps stays
                    self._remove_host_time(t, win.marker_start, win.marker_end, h_dur, h_gap, None)
                sel = ops[g.h_thread[g.g_launch[ops]] == t]
                cost = measured if measured is not None else GRAPH_LAUNCH_NS + GRAPH_LAUNCH_PER_NODE_NS * len(sel)
                costs.append(cost)
                h_dur[first] = cost
                launch_to[sel] = first
                # released by the graph: the GPU runs them back to back
                l_lat[sel] = np.minimum(l_lat[sel], g.typ_launch_ns)
                s_lat[sel] = np.minimum(s_lat[sel], gap)
                collapsed += len(body)
        if measured is not None:
            launch = f"{measured / 1e3:.1f} us, the trace's median cudaGraphLaunch"
        else:
            med = float(np.median(costs)) if costs else float(GRAPH_LAUNCH_NS)
            launch = (f"median {med / 1e3:.1f} us: {GRAPH_LAUNCH_NS / 1e3:.1f} us + {GRAPH_LAUNCH_PER_NODE_NS} ns a kernel, "
                      "measured on an H100 without a profiler")
        notes.append({"change": "--cuda-graphs", "count": collapsed,
                      "what": f"{collapsed} host call(s) and the host work between them collapse into one graph launch per "
                              f"step ({launch}); kernels {gap} ns apart on the GPU"})


def whatif_model(trace: Trace | None, step: str | None = None, device: str | None = None, graph: DepGraph | None = None,
                 paths: CritPathResult | None = None, sol: SolResult | pd.DataFrame | None = None,
                 fusion: pd.DataFrame | None = None, base: tuple[DepGraph, list[StepWindow], Replay] | None = None) -> WhatIfModel:
    """The graph, steps and measured replay of ``trace``, ready to project change sets.

    ``sol`` (a :class:`~kviewer.analysis.sol.SolResult` or its table) and ``fusion`` (the
    fusion candidates) when the caller already has them for ``device``: else they are computed
    when a change needs them. ``base``: the graph, its step windows and the measured replay when
    the caller has them (a cache; :mod:`kviewer.session.graph_cache`); ``trace`` may then be
    None when only changes that read no table are projected (:attr:`Changes.reads_tables`).

    Raises
    ------
    AnalysisError
        when the trace has no kernels or no launches linked to them (see :func:`check_graph`).
    """
    table = sol if sol is None or isinstance(sol, pd.DataFrame) else sol.table
    if base is not None:  # the graph, its step windows (for ``step``) and the measured replay, from a cache
        graph, windows, measured = base
        return WhatIfModel(trace, graph, windows, measured, step_bounds(graph, measured, windows), device, table, fusion)
    if trace is None:
        raise AnalysisError("a what-if model needs the trace or a cached graph (base)")
    if paths is not None and paths.measured is not None:  # the critical paths' graph, steps and replay
        graph, windows, measured = paths.graph, paths.windows, paths.measured
        return WhatIfModel(trace, graph, windows, measured, step_bounds(graph, measured, windows), device, table, fusion)
    graph = graph if graph is not None else build_graph(trace)
    check_graph(trace, graph)
    windows, _ = step_windows(trace, graph, step)
    measured = replay(graph)
    return WhatIfModel(trace, graph, windows, measured, step_bounds(graph, measured, windows), device, table, fusion)


def project(trace: Trace, changes: Changes, step: str | None = None, device: str | None = None) -> Projection:
    """Measured and projected step times of ``trace`` under ``changes`` (see the module doc)."""
    return whatif_model(trace, step, device).project(changes)


def top_projections(model: WhatIfModel, limit: int = 5) -> list[Projection]:
    """Each single change that applies to the trace, and all of them together, best first (the
    report's "What would help most")."""
    candidates: list[Changes] = []
    try:
        if len(model.fusion_table()) and model.fusion_table()["fused_est_ns"].notna().any():
            candidates.append(Changes(fuse=()))
    except AnalysisError:
        pass
    candidates.append(Changes(cuda_graphs=True))
    try:
        if len(model.layout_kernels()):
            candidates.append(Changes(channels_last=True))
    except AnalysisError:
        pass
    if (model.graph.h_class == H_SYNC).any():
        candidates.append(Changes(no_sync=()))
    try:
        kinds = set(model.sol_table().loc[model.sol_table()["t_sol_ns"].notna(), "kind"].astype(str))
        for k in ("gemm", "attention", "elementwise", "norm"):
            if k in kinds:
                candidates.append(Changes(sol=((k, 80.0),)))
    except AnalysisError:
        pass
    out = [model.project(c) for c in candidates]
    out.sort(key=lambda p: p.median_projected_ns)
    if len(candidates) > 1:
        combined = Changes(fuse=next((c.fuse for c in candidates if c.fuse is not None), None), cuda_graphs=True,
                           sol=tuple(s for c in candidates for s in c.sol),
                           no_sync=next((c.no_sync for c in candidates if c.no_sync is not None), None),
                           channels_last=any(c.channels_last for c in candidates))
        out.append(model.project(combined))
    return out[: limit] + ([out[-1]] if len(out) > limit else [])


def projected_trace(model: WhatIfModel, projection: Projection) -> Trace:
    """The trace as the projection would run it: every kernel, copy and host range at its
    replayed time (ranges between API calls move with the calls around them), so the projected
    timeline can be laid beside the measured one. Removed GPU ops keep a zero duration."""
    g = model.graph
    rep = projection.replayed
    t = model.tables()
    out = _Trace(meta=copy.copy(t.meta))
    out.meta.path = f"{t.meta.path} (projected: {projection.changes.label()})"
    out.meta.warnings = list(t.meta.warnings)
    out.devices, out.metrics = t.devices, t.metrics
    orders: dict[str, np.ndarray] = {}
    for name, code in (("kernels", 0), ("gpu_ops", 1)):
        df = t.table(name).copy()
        s = df["start"].to_numpy(np.int64).copy()
        e = df["end"].to_numpy(np.int64).copy()
        sel = g.g_table == code
        s[g.g_row[sel]] = rep.g_start[sel]
        e[g.g_row[sel]] = rep.g_end[sel]
        df["start"], df["end"], df["dur"] = s, e, e - s
        setattr(out, name, df)
    c = t.cpu_slices.copy()
    if len(c):
        s = c["start"].to_numpy(np.int64).copy()
        e = c["end"].to_numpy(np.int64).copy()
        pid, tid = c["pid"].to_numpy(np.int64), c["tid"].to_numpy(np.int64)
        for th, (p, d) in enumerate(g.threads):
            rows = np.flatnonzero((pid == p) & (tid == d))
            if len(rows):
                s[rows] = map_host_times(g, rep, th, s[rows])
                e[rows] = np.maximum(map_host_times(g, rep, th, e[rows]), s[rows])
        c["start"], c["end"], c["dur"] = s, e, e - s
    out.cpu_slices = c
    # the tables keep their sort invariant (by start, id = position); flows follow the new ids
    for name in ("kernels", "gpu_ops", "cpu_slices"):
        df = out.table(name)
        order = np.argsort(df["start"].to_numpy(np.int64), kind="stable")
        orders[name] = order
        df = df.iloc[order].reset_index(drop=True)
        df["id"] = np.arange(len(df), dtype=np.int64)
        setattr(out, name, df)
    f = t.flows.copy()
    if len(f):
        new_id = {name: np.argsort(o, kind="stable") for name, o in orders.items()}
        src = f["src"].to_numpy(np.int64)
        ok = (src >= 0) & (src < len(new_id["cpu_slices"]))
        f.loc[ok, "src"] = new_id["cpu_slices"][src[ok]]
        for name in ("kernels", "gpu_ops"):
            m = (f["dst_table"].astype(str) == name).to_numpy().copy()
            dst = f["dst"].to_numpy(np.int64)
            m &= (dst >= 0) & (dst < len(new_id[name]))
            f.loc[m, "dst"] = new_id[name][dst[m]]
    out.flows = f
    return out
