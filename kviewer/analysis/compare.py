"""Compare two reports: kernel groups matched across tools and vendors, their deltas, totals, steps.

The diff table
--------------
Kernels of A and B are grouped and matched by :mod:`kviewer.analysis.matching`; each row of the
diff table holds the kernels of one match (or of a group found in one report only), so the rows
partition the kernels of both reports and ``sum(delta_ns) == total_B - total_A`` exactly (int64).

Columns: ``name`` (a readable label), ``status``, ``count_a``, ``total_a_ns``, ``count_b``,
``total_b_ns``, ``delta_ns`` (``total_b_ns - total_a_ns``), ``delta_pct`` (of ``total_a_ns``,
NaN when A has none), ``avg_a_ns``, ``avg_b_ns``, ``noise_ns``, ``matched_by`` (the matching
level), ``kind``, ``op``, ``name_a``/``name_b`` (the kernel name with the most time on each
side), ``groups_a``/``groups_b`` (how many distinct kernel groups the row joins), ``replaced_by``,
``replaces`` (labels of linked rows, ``; ``-separated) and ``fusion_set`` (0 when none). Rows
are sorted by ``|delta_ns|``, largest first.

Status
------
``only in A`` / ``only in B``
    The kernels have no counterpart in the other report.
``replaced``
    Only in A, and the work of its op appears in the name of a fused kernel found only in B
    (Inductor names ``triton_poi_fused__unsafe_view_add_gelu_mul_2`` after the aten ops it fuses):
    B does this work inside that fused kernel. ``replaced_by`` lists the B rows.
``replacement``
    Only in B: a fused kernel doing the work of ``replaces`` (rows only in A). The same relation
    holds the other way round (A compiled, B eager): A's fused rows are then ``replaced`` by B's
    unfused ones. Linked rows share a ``fusion_set`` number; :attr:`CompareResult.fusion` sums
    each set, since the time of a fused kernel cannot honestly be split among the ops it fuses.
``unchanged``
    Matched, and ``|delta_ns| <= noise_ns``.
``changed``
    Matched, and ``|delta_ns| > noise_ns``.

Noise
-----
``noise_ns = max(rel * total_a_ns, k * sqrt(count_a * var_a + count_b * var_b))`` with ``rel =
2%`` and ``k = 2`` by default. ``var`` is the pooled sample variance of the row's kernel
durations on each side *within* sub-groups of one kernel group and one input shape of its op
(when the trace records shapes): one GEMM kernel run on four matrix shapes has four typical
durations, and only the spread around each is run-to-run noise. The second term is then ``k``
standard deviations of ``total_b - total_a`` if both sides drew their durations from the same
distributions (the spread of a sum of ``n`` durations is ``std * sqrt(n)``); per kernel it is
the ``k * std / sqrt(n)`` rule on the mean. A count that differs moves the total by whole kernels, which is far outside the noise unless
the row's kernels are tiny compared to its spread. A zero delta is always unchanged.

One outlier launch can widen that spread enough to hide a shift every other launch shows. So a
row of one kernel group on one input shape on each side whose launches *all* ran slower (or all
faster) than every launch of the other side is changed when a rank test at that full separation
rejects "same distribution" (exact two-sided p = 2 / C(n_a + n_b, n_a) <= ``alpha`` = 5%: four
launches against four, not three against three) and the delta, in that direction, is beyond the
relative floor (:meth:`NoiseModel.separated`; the per-op table keeps the spread rule alone: an
op's launches mix the different kernels it runs).

Totals and steps
----------------
:attr:`CompareResult.totals`: kernel time, kernel count, GPU busy time (the union of kernel
intervals per device, summed over devices), GPU span (first kernel start to last kernel end),
matched kernel time, and where both reports have steps (:mod:`kviewer.analysis.steps`) the step
count and the median and mean GPU span per step. :attr:`CompareResult.steps` pairs the steps of
A and B by position. :attr:`CompareResult.align_offset_ns` is the shift that puts B's first step
(or first kernel, without steps) on A's: ``time_in_A = time_in_B + align_offset_ns``.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pandas as pd

from kviewer.analysis import kinds as _kinds, matching
from kviewer.analysis.matching import MatchOptions
from kviewer.analysis.merge import ALIGN_MAX_CELLS, aligned_pairs, launch_order, occurrence_pairs
from kviewer.analysis.steps import busy_ns, find_steps, kernel_steps
from kviewer.core import Trace
from kviewer.core.names import short_name

ONLY_A = "only in A"
ONLY_B = "only in B"
CHANGED = "changed"
UNCHANGED = "unchanged"
REPLACED = "replaced"
REPLACEMENT = "replacement"
STATUSES = (CHANGED, UNCHANGED, ONLY_A, ONLY_B, REPLACED, REPLACEMENT)

DIFF_COLUMNS = [
    "name",
    "status",
    "count_a",
    "total_a_ns",
    "count_b",
    "total_b_ns",
    "delta_ns",
    "delta_pct",
    "avg_a_ns",
    "avg_b_ns",
    "noise_ns",
    "matched_by",
    "kind",
    "op",
    "name_a",
    "name_b",
    "groups_a",
    "groups_b",
    "replaced_by",
    "replaces",
    "fusion_set",
    "precision_a",
    "precision_b",
    "launches_per_step_a",
    "launches_per_step_b",
    "step_a_ns",
    "step_b_ns",
    "delta_step_ns",
    "delta_step_pct",
]

OP_COLUMNS = ["op"] + [c for c in DIFF_COLUMNS if c not in ("name", "op", "matched_by")]
TOTAL_COLUMNS = ["metric", "unit", "a", "b", "delta", "delta_pct"]
STEP_PAIR_COLUMNS = ["position", "step_a", "step_b", "gpu_span_a", "gpu_span_b", "delta_ns", "delta_pct", "kernel_ns_a", "kernel_ns_b", "kernel_count_a", "kernel_count_b"]
FUSION_COLUMNS = ["fusion_set", "rows_a", "rows_b", "total_a_ns", "total_b_ns", "delta_ns", "delta_pct"]
NO_OP = "(no op)"


@dataclass(frozen=True)
class NoiseModel:
    """When a matched row counts as unchanged (see the module docstring)."""

    rel: float = 0.02
    k: float = 2.0
    alpha: float = 0.05
    """a row whose launches all lie beyond the other side's is changed when a rank test at that
    full separation rejects "same distribution" at this level (p = 2 / C(n_a + n_b, n_a))"""

    def separated(self, count_a: int, count_b: int) -> bool:
        """Whether ``count_a`` launches all faster (or all slower) than ``count_b`` others is
        evidence of a change: the exact two-sided p-value of full separation is at most ``alpha``."""
        if count_a < 1 or count_b < 1:
            return False
        return 2.0 / math.comb(int(count_a) + int(count_b), int(count_a)) <= self.alpha

    def noise_ns(self, total_a: np.ndarray, count_a: np.ndarray, var_a: np.ndarray, count_b: np.ndarray, var_b: np.ndarray) -> np.ndarray:
        spread = self.k * np.sqrt(count_a * var_a + count_b * var_b)
        # a spread the source does not give (a profiler's summary file without a deviation) is
        # unknown: the relative floor alone then decides (fmax skips the NaN)
        return np.fmax(self.rel * total_a.astype(np.float64), spread)


@dataclass
class CompareResult:
    """Everything the compare view and ``kviewer compare`` show.

    Attributes
    ----------
    label_a, label_b
        Short names of the two reports (file names).
    groups
        The diff table of kernel groups (columns :data:`DIFF_COLUMNS`).
    ops
        Per launching op (columns :data:`OP_COLUMNS`) when both reports link kernels to ops
        (PyTorch traces), else None.
    totals
        Columns :data:`TOTAL_COLUMNS`, one row per metric.
    steps_a, steps_b
        The steps of each report (:func:`kviewer.analysis.steps.find_steps`).
    steps
        Steps paired by position (columns :data:`STEP_PAIR_COLUMNS`); empty without steps.
    fusion
        One row per fusion set: the rows of A and B it links and their summed totals.
    align_offset_ns
        ``time_in_A = time_in_B + align_offset_ns`` puts B's first step on A's.
    align_basis
        ``"first step"`` or ``"first kernel"``.
    row_of_kernel_a, row_of_kernel_b
        For each kernel (by row position in the trace), its row in ``groups``.
    op_row_of_kernel_a, op_row_of_kernel_b
        Likewise for ``ops`` (None without ops).
    total_a_ns, total_b_ns
        Summed kernel durations.
    use_ops
        Whether ops took part in the matching.
    """

    label_a: str
    label_b: str
    groups: pd.DataFrame
    ops: pd.DataFrame | None
    totals: pd.DataFrame
    steps_a: pd.DataFrame
    steps_b: pd.DataFrame
    steps: pd.DataFrame
    fusion: pd.DataFrame
    align_offset_ns: int
    align_basis: str
    row_of_kernel_a: np.ndarray
    row_of_kernel_b: np.ndarray
    op_row_of_kernel_a: np.ndarray | None
    op_row_of_kernel_b: np.ndarray | None
    total_a_ns: int
    total_b_ns: int
    use_ops: bool
    noise: NoiseModel = field(default_factory=NoiseModel)
    options: MatchOptions = field(default_factory=MatchOptions)
    per_step: bool = False
    """both reports have steps: the headline, the statuses and the ``*_step_*`` columns are per step"""
    step_median_a_ns: float = math.nan
    step_median_b_ns: float = math.nan
    """median GPU span of a step on each side (NaN without steps)"""
    notes: list[str] = field(default_factory=list)
    """what the table should say beside it (step counts that differ, ...)"""

    @property
    def delta_ns(self) -> int:
        return self.total_b_ns - self.total_a_ns

    @property
    def total_slower_pct(self) -> float:
        """How much more kernel time B takes than A in total, percent of A (negative: B is faster)."""
        if self.total_a_ns == 0:
            return 0.0 if self.total_b_ns == 0 else math.inf
        return (self.total_b_ns - self.total_a_ns) / self.total_a_ns * 100.0

    @property
    def slower_pct(self) -> float:
        """The headline: how much longer B's median step is than A's, percent (with steps on both
        sides; two files of 3 and 10 steps compare per step, not per file), else
        :attr:`total_slower_pct`. Negative: B is faster."""
        if self.per_step and self.step_median_a_ns > 0 and not math.isnan(self.step_median_b_ns):
            return (self.step_median_b_ns - self.step_median_a_ns) / self.step_median_a_ns * 100.0
        return self.total_slower_pct

    @property
    def headline_basis(self) -> str:
        """What :attr:`slower_pct` compares: "median step" or "kernel time"."""
        return "median step" if self.per_step and self.step_median_a_ns > 0 else "kernel time"

    def kernels_of_row(self, row: int, table: str = "groups") -> tuple[np.ndarray, np.ndarray]:
        """Row positions of the kernels of A and of B in a row of ``groups`` (or ``ops``)."""
        if table == "ops":
            if self.op_row_of_kernel_a is None or self.op_row_of_kernel_b is None:
                raise ValueError("this comparison has no per-op table")
            return np.flatnonzero(self.op_row_of_kernel_a == row), np.flatnonzero(self.op_row_of_kernel_b == row)
        return np.flatnonzero(self.row_of_kernel_a == row), np.flatnonzero(self.row_of_kernel_b == row)


def compare(
    a: Trace,
    b: Trace,
    options: MatchOptions | None = None,
    noise: NoiseModel | None = None,
    detect_steps: bool = True,
) -> CompareResult:
    """Compare report ``b`` against report ``a`` (deltas are B - A)."""
    opts = options or MatchOptions()
    noise = noise or NoiseModel()
    rows_a, rows_b = _kinds.kernel_op_rows(a), _kinds.kernel_op_rows(b)  # the kernel -> op join, once a side
    ops_a, shapes_a = _kinds.kernel_op_info(a, rows_a)
    ops_b, shapes_b = _kinds.kernel_op_info(b, rows_b)
    use_ops = opts.use_ops
    if use_ops is None:
        # ops from one side only would keep every group apart: match on names alone then
        use_ops = matching.op_coverage(ops_a) >= 0.5 and matching.op_coverage(ops_b) >= 0.5
    key_ops_a = ops_a if use_ops else np.full(len(ops_a), "", dtype=object)
    key_ops_b = ops_b if use_ops else np.full(len(ops_b), "", dtype=object)
    # precision from the op's dtypes when ops take part, else from the name, the same rule on both sides
    prec_a = _kinds.kernel_precisions(a, use_ops=bool(use_ops), ops=rows_a)
    prec_b = _kinds.kernel_precisions(b, use_ops=bool(use_ops), ops=rows_b)
    ga, group_of_a = matching.kernel_groups(a, key_ops_a, opts, shapes_a, prec_a, shapes_a if use_ops else None)
    gb, group_of_b = matching.kernel_groups(b, key_ops_b, opts, shapes_b, prec_b, shapes_b if use_ops else None)
    m = matching.match_groups(ga, gb, matching.ladder(use_ops, opts.use_launch))
    steps_a = find_steps(a, detect=detect_steps)
    steps_b = find_steps(b, detect=detect_steps)
    step_of_a = kernel_steps(a, steps_a) if len(steps_a) else np.full(len(a.kernels), -1, dtype=np.int64)
    step_of_b = kernel_steps(b, steps_b) if len(steps_b) else np.full(len(b.kernels), -1, dtype=np.int64)
    m = matching.link_groups(m, _order_links(a, b, ga, gb, group_of_a, group_of_b, m, step_of_a, step_of_b), ORDER_LEVEL)
    groups, order = _diff_table(ga, gb, m, noise, by_op=False)
    inverse = np.empty(len(order), dtype=np.int64)
    inverse[order] = np.arange(len(order))
    row_a = inverse[m.row_a[group_of_a]] if len(group_of_a) else np.zeros(0, dtype=np.int64)
    row_b = inverse[m.row_b[group_of_b]] if len(group_of_b) else np.zeros(0, dtype=np.int64)
    # per step only between marked steps (ProfilerStep#N, NVTX step_N): iterations detected in
    # the kernel sequence are a guess, not a unit the user chose
    per_step = bool(len(steps_a) and len(steps_b)) and not _detected(steps_a) and not _detected(steps_b)
    notes: list[str] = []
    if per_step:
        groups, row_a, row_b = _per_step(groups, row_a, row_b, a, b, step_of_a, step_of_b, len(steps_a), len(steps_b), noise)
        if len(steps_a) != len(steps_b):
            notes.append(f"A has {len(steps_a)} steps and B {len(steps_b)}: statuses, deltas and the headline are per step "
                         "(median step, kernel time and launches per step); the totals columns are per file")
    groups = _separated(groups, row_a, row_b, a, b, _launch_kind(group_of_a, shapes_a), _launch_kind(group_of_b, shapes_b),
                        noise, per_step)
    ranks_a, ranks_b = _rank_count(a), _rank_count(b)
    if ranks_a and ranks_b and ranks_a != ranks_b:
        notes.append(f"A holds the kernels of {ranks_a} rank{'s' if ranks_a > 1 else ''} and B of {ranks_b}: every figure adds "
                     "all of a side's ranks (per step: each rank's kernels in its own step of that number)")

    op_table = None
    op_row_a = op_row_b = None
    if use_ops:
        op_table, op_row_a, op_row_b = _op_table(a, b, ops_a, ops_b, shapes_a, shapes_b, noise, prec_a, prec_b)

    total_a = _kernel_total(a)
    total_b = _kernel_total(b)
    offset, basis = _align(a, b, steps_a, steps_b)
    matched_a = int(groups.loc[groups["status"].isin([CHANGED, UNCHANGED]), "total_a_ns"].sum())
    matched_b = int(groups.loc[groups["status"].isin([CHANGED, UNCHANGED]), "total_b_ns"].sum())
    totals = _totals(a, b, total_a, total_b, matched_a, matched_b, steps_a, steps_b)
    label_a, label_b = _label(a), _label(b)
    if label_a == label_b and a.meta.path != b.meta.path:
        # same file name in two folders (one model on two machines): name the folders too
        label_a, label_b = _label(a, 2), _label(b, 2)
    return CompareResult(
        label_a=label_a,
        label_b=label_b,
        groups=groups,
        ops=op_table,
        totals=totals,
        steps_a=steps_a,
        steps_b=steps_b,
        steps=_pair_steps(steps_a, steps_b),
        fusion=_fusion_table(groups),
        align_offset_ns=offset,
        align_basis=basis,
        row_of_kernel_a=row_a,
        row_of_kernel_b=row_b,
        op_row_of_kernel_a=op_row_a,
        op_row_of_kernel_b=op_row_b,
        total_a_ns=total_a,
        total_b_ns=total_b,
        use_ops=bool(use_ops),
        noise=noise,
        options=opts,
        per_step=per_step,
        step_median_a_ns=float(np.median(steps_a["gpu_span"].to_numpy(np.float64))) if len(steps_a) else math.nan,
        step_median_b_ns=float(np.median(steps_b["gpu_span"].to_numpy(np.float64))) if len(steps_b) else math.nan,
        notes=notes,
    )


def _detected(steps: pd.DataFrame) -> bool:
    return bool(len(steps)) and bool((steps["source"].astype(str) == "detected").all())


#: the pairing rule of rows joined by their kernels' order within the steps
ORDER_LEVEL = "kind+precision+order"


def _order_links(a: Trace, b: Trace, ga: pd.DataFrame, gb: pd.DataFrame, group_of_a: np.ndarray, group_of_b: np.ndarray,
                 m: matching.Matching, step_of_a: np.ndarray, step_of_b: np.ndarray) -> list[tuple[int, int]]:
    """Pairs (group of A, group of B) of op-less groups still unmatched, joined by aligning the two
    reports' kernel sequences within the steps (step i of A with step i of B; the whole capture
    without steps) on (kind, precision): the n-th op-less GEMM of a step in A meets the n-th of B
    even when one is cuBLAS and the other hipBLASLt, and a bf16 kernel never meets an fp32 one.
    Each group links to the partner most of its aligned kernels met."""
    side = m.rows["side"].to_numpy(dtype=object)
    # kernels of a known kind only: two "other" kernels say nothing about being the same work
    free_a = (side[m.row_a] == "a") & (ga["op"].to_numpy(dtype=object) == "") & (ga["kind"].to_numpy(dtype=object) != "other") if len(ga) else np.zeros(0, dtype=bool)
    free_b = (side[m.row_b] == "b") & (gb["op"].to_numpy(dtype=object) == "") & (gb["kind"].to_numpy(dtype=object) != "other") if len(gb) else np.zeros(0, dtype=bool)
    if not free_a.any() or not free_b.any():
        return []
    codes: dict[tuple[str, str], int] = {}
    ka = [codes.setdefault((str(x), str(y)), len(codes)) for x, y in zip(ga["kind"], ga["precision"])]
    kb = [codes.setdefault((str(x), str(y)), len(codes)) for x, y in zip(gb["kind"], gb["precision"])]
    ca = np.asarray(ka, dtype=np.int64)[group_of_a]
    cb = np.asarray(kb, dtype=np.int64)[group_of_b]
    oa = launch_order(a.kernels)
    ob = launch_order(b.kernels)
    oa = oa[free_a[group_of_a[oa]]]
    ob = ob[free_b[group_of_b[ob]]]
    sa, sb = step_of_a[oa], step_of_b[ob]
    if (sa >= 0).any() and (sb >= 0).any():
        ids_a = sorted(set(sa[sa >= 0].tolist()))
        ids_b = sorted(set(sb[sb >= 0].tolist()))
        seqs = [(oa[sa == x], ob[sb == y]) for x, y in zip(ids_a, ids_b)]
    else:
        seqs = [(oa, ob)]
    votes: dict[tuple[int, int], int] = {}
    for xa, xb in seqs:
        # long sequences (a whole capture, or a step of thousands of kernels) pair by occurrence:
        # aligning them takes about quadratic time on these few codes (minutes at 40k kernels)
        pair = aligned_pairs if len(xa) * len(xb) <= ALIGN_MAX_CELLS else occurrence_pairs
        for i, j in pair(ca[xa], cb[xb]):
            key = (int(group_of_a[xa[i]]), int(group_of_b[xb[j]]))
            votes[key] = votes.get(key, 0) + 1
    best_a: dict[int, tuple[int, int]] = {}
    best_b: dict[int, tuple[int, int]] = {}
    for (ia, ib), v in votes.items():
        if v > best_a.get(ia, (0, -1))[0]:
            best_a[ia] = (v, ib)
        if v > best_b.get(ib, (0, -1))[0]:
            best_b[ib] = (v, ia)
    links = {(ia, ib) for ia, (_, ib) in best_a.items()} | {(ia, ib) for ib, (_, ia) in best_b.items()}
    return sorted(links)


def _per_step(groups: pd.DataFrame, row_a: np.ndarray, row_b: np.ndarray, a: Trace, b: Trace, step_of_a: np.ndarray,
              step_of_b: np.ndarray, n_a: int, n_b: int, noise: NoiseModel) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """The per-step columns of the diff table (kernels inside steps, divided by each side's step
    count), the matched rows' status from the per-step delta, and the rows sorted by it."""
    nrows = len(groups)
    dur_a = a.kernels["dur"].to_numpy(np.float64)
    dur_b = b.kernels["dur"].to_numpy(np.float64)
    in_a, in_b = step_of_a >= 0, step_of_b >= 0
    cnt_a = np.bincount(row_a[in_a], minlength=nrows).astype(np.float64)
    cnt_b = np.bincount(row_b[in_b], minlength=nrows).astype(np.float64)
    tot_a = np.bincount(row_a[in_a], weights=dur_a[in_a], minlength=nrows)
    tot_b = np.bincount(row_b[in_b], weights=dur_b[in_b], minlength=nrows)
    step_a, step_b = tot_a / n_a, tot_b / n_b
    delta = step_b - step_a
    # the spread of a per-step mean of sums: var * launches / steps^2 on each side
    var_a = _row_var(groups, "a")
    var_b = _row_var(groups, "b")
    spread = noise.k * np.sqrt(cnt_a * var_a / n_a**2 + cnt_b * var_b / n_b**2)
    noise_step = np.maximum(noise.rel * step_a, spread)
    groups = groups.copy()
    groups["launches_per_step_a"] = cnt_a / n_a
    groups["launches_per_step_b"] = cnt_b / n_b
    groups["step_a_ns"] = step_a
    groups["step_b_ns"] = step_b
    groups["delta_step_ns"] = delta
    with np.errstate(invalid="ignore", divide="ignore"):
        groups["delta_step_pct"] = np.where(step_a > 0, delta / np.where(step_a > 0, step_a, 1.0) * 100.0, np.nan)
    status = groups["status"].to_numpy(dtype=object).copy()
    matched = np.isin(status, [CHANGED, UNCHANGED])
    status[matched] = np.where(np.abs(delta[matched]) <= noise_step[matched], UNCHANGED, CHANGED)
    groups["status"] = status
    order = np.lexsort((groups["name"].to_numpy(dtype=str), -np.abs(delta)))
    var_a, var_b = var_a[order], var_b[order]
    groups = groups.iloc[order].reset_index(drop=True)
    groups.attrs["var_a"] = var_a
    groups.attrs["var_b"] = var_b
    inverse = np.empty(nrows, dtype=np.int64)
    inverse[order] = np.arange(nrows)
    # fusion sets keep their numbers; renumber in the new order
    sets = groups["fusion_set"].to_numpy()
    renum: dict[int, int] = {}
    for x in sets:
        if x and int(x) not in renum:
            renum[int(x)] = len(renum) + 1
    groups["fusion_set"] = np.array([renum.get(int(x), 0) for x in sets], dtype=np.int64)
    return groups, inverse[row_a], inverse[row_b]


def _rank_count(t: Trace) -> int:
    """How many ranks' kernels a trace holds (a trace without ranks: 1; no kernels: 0)."""
    return len(np.unique(t.kernels["rank"].to_numpy())) if len(t.kernels) else 0


def _launch_kind(group_of: np.ndarray, shapes: np.ndarray) -> np.ndarray:
    """Per kernel, a code of its kernel group and its op's input shapes: the sub-groups whose
    spread is run-to-run noise (see the module docstring)."""
    if not len(group_of):
        return np.zeros(0, dtype=np.int64)
    shape_code = pd.factorize(pd.Series(shapes, dtype=object).fillna(""))[0].astype(np.int64)
    return np.asarray(group_of, dtype=np.int64) * (int(shape_code.max()) + 1) + shape_code


def _separated(groups: pd.DataFrame, row_a: np.ndarray, row_b: np.ndarray, a: Trace, b: Trace, kind_a: np.ndarray,
               kind_b: np.ndarray, noise: NoiseModel, per_step: bool) -> pd.DataFrame:
    """Unchanged rows whose launches (one kernel group on one input shape each side) all ran
    faster, or all slower, than every launch of the other side, beyond the relative floor and
    in the direction of the delta, are changed (:meth:`NoiseModel.separated`): one outlier can
    widen the spread enough to hide a shift that every launch shows."""
    status = groups["status"].to_numpy(dtype=object)
    if not (status == UNCHANGED).any() or not len(row_a) or not len(row_b):
        return groups
    nrows = len(groups)

    def side(rows: np.ndarray, t: Trace, kind: np.ndarray) -> pd.DataFrame:
        df = pd.DataFrame({"row": rows, "d": t.kernels["dur"].to_numpy(np.int64), "k": kind})
        return df.groupby("row").agg(n=("d", "size"), lo=("d", "min"), hi=("d", "max"), kinds=("k", "nunique")).reindex(range(nrows))

    sa, sb = side(row_a, a, kind_a), side(row_b, b, kind_b)
    delta = groups["delta_step_ns" if per_step else "delta_ns"].to_numpy(np.float64)
    floor = noise.rel * groups["step_a_ns" if per_step else "total_a_ns"].to_numpy(np.float64)
    one_kind = (sa["kinds"] == 1).to_numpy() & (sb["kinds"] == 1).to_numpy()
    up = (sb["lo"] > sa["hi"]).to_numpy() & (delta > floor)
    down = (sb["hi"] < sa["lo"]).to_numpy() & (-delta > floor)
    candidates = np.flatnonzero((status == UNCHANGED) & one_kind & (up | down))
    hit = [int(i) for i in candidates if noise.separated(int(sa["n"].iloc[i]), int(sb["n"].iloc[i]))]
    if not hit:
        return groups
    groups = groups.copy()
    new = status.copy()
    new[hit] = CHANGED
    groups["status"] = new
    return groups


def _row_var(groups: pd.DataFrame, side: str) -> np.ndarray:
    """The pooled per-launch variance of each row on one side (kept by :func:`_diff_table`)."""
    v = groups.attrs.get(f"var_{side}")
    return np.zeros(len(groups)) if v is None else np.asarray(v, dtype=np.float64)


# ---------------------------------------------------------------------------------------------
# the diff table


def _kernel_total(t: Trace) -> int:
    """All kernel time of a trace (a summary-only file: the total of its summary rows)."""
    if t.stats_only:
        return int(t.kernel_stats["total_ns"].to_numpy(dtype=np.int64).sum())
    return int(t.kernels["dur"].to_numpy(dtype=np.int64).sum())


def _label(t: Trace, parts: int = 1) -> str:
    path = t.meta.path.rstrip("/")
    return "/".join(path.split(os.sep)[-parts:]) or t.meta.path


def _row_sums(g: pd.DataFrame, row_of_group: np.ndarray, nrows: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per row: kernel count, total (int64), pooled variance and number of member groups."""
    count = np.zeros(nrows, dtype=np.int64)
    total = np.zeros(nrows, dtype=np.int64)
    ss = np.zeros(nrows, dtype=np.float64)
    nsub = np.zeros(nrows, dtype=np.int64)
    ngroups = np.zeros(nrows, dtype=np.int64)
    if len(g):
        np.add.at(count, row_of_group, g["count"].to_numpy(dtype=np.int64))
        np.add.at(total, row_of_group, g["total_ns"].to_numpy(dtype=np.int64))
        np.add.at(ss, row_of_group, g["ss"].to_numpy(dtype=np.float64))
        np.add.at(nsub, row_of_group, g["nsub"].to_numpy(dtype=np.int64))
        np.add.at(ngroups, row_of_group, 1)
    # pooled within-sub-group variance: the spread of one kernel on one shape, run to run
    dof = count - nsub
    var = np.divide(ss, dof, out=np.zeros(nrows), where=dof > 0)
    return count, total, var, ngroups


def _representative(g: pd.DataFrame, row_of_group: np.ndarray, nrows: int, col: str) -> np.ndarray:
    """Per row, ``col`` of the member group with the most time ("" for no member)."""
    out = np.full(nrows, "", dtype=object)
    if not len(g):
        return out
    df = pd.DataFrame({"row": row_of_group, "t": g["total_ns"].to_numpy(), "v": g[col].to_numpy(dtype=object)})
    df = df.sort_values(["row", "t"], ascending=[True, False], kind="stable").drop_duplicates("row")
    out[df["row"].to_numpy()] = df["v"].to_numpy(dtype=object)
    return out


def _diff_table(ga: pd.DataFrame, gb: pd.DataFrame, m: matching.Matching, noise: NoiseModel, by_op: bool) -> tuple[pd.DataFrame, np.ndarray]:
    """Rows of the matching with their statistics, statuses and fusion links, sorted.

    Returns the table and ``order`` (``table.iloc[i]`` is matching row ``order[i]``).
    """
    nrows = len(m.rows)
    ca, ta, var_a, na = _row_sums(ga, m.row_a, nrows)
    cb, tb, var_b, nb = _row_sums(gb, m.row_b, nrows)
    delta = tb - ta
    noise_ns = noise.noise_ns(ta, ca, var_a, cb, var_b)
    side = m.rows["side"].to_numpy(dtype=object)
    status = np.where(side == "a", ONLY_A, np.where(side == "b", ONLY_B, np.where(np.abs(delta) <= noise_ns, UNCHANGED, CHANGED))).astype(object)
    name_a = _representative(ga, m.row_a, nrows, "name")
    name_b = _representative(gb, m.row_b, nrows, "name")
    op_a = _representative(ga, m.row_a, nrows, "op")
    op_b = _representative(gb, m.row_b, nrows, "op")
    kind_a = _representative(ga, m.row_a, nrows, "kind")
    kind_b = _representative(gb, m.row_b, nrows, "kind")
    op = np.where(op_a != "", op_a, op_b)
    kind = np.where(kind_a != "", kind_a, kind_b)
    matched_by = m.rows["matched_by"].to_numpy(dtype=object)
    if by_op:
        names = np.array([o or NO_OP for o in op], dtype=object)
    else:
        variant_a = _representative(ga, m.row_a, nrows, "variant")
        variant_b = _representative(gb, m.row_b, nrows, "variant")
        launch = np.where(_representative(ga, m.row_a, nrows, "launch") != "", _representative(ga, m.row_a, nrows, "launch"), _representative(gb, m.row_b, nrows, "launch"))
        names = _labels(name_a, name_b, variant_a, variant_b, op, kind, matched_by, launch)
        # rows split by the op's input shapes: the shapes tell coinciding labels apart
        shapes = np.where(_representative(ga, m.row_a, nrows, "shapes") != "", _representative(ga, m.row_a, nrows, "shapes"),
                          _representative(gb, m.row_b, nrows, "shapes"))
        for i in np.flatnonzero(pd.Series(names).duplicated(keep=False).to_numpy()):
            if shapes[i]:
                names[i] = f"{names[i]} {_short_shapes(str(shapes[i]))}"
    with np.errstate(invalid="ignore", divide="ignore"):
        delta_pct = np.where(ta > 0, delta / np.maximum(ta, 1) * 100.0, np.nan)
        avg_a = np.where(ca > 0, ta / np.maximum(ca, 1), np.nan)
        avg_b = np.where(cb > 0, tb / np.maximum(cb, 1), np.nan)
    table = pd.DataFrame(
        {
            "name": names,
            "status": status,
            "count_a": ca,
            "total_a_ns": ta,
            "count_b": cb,
            "total_b_ns": tb,
            "delta_ns": delta,
            "delta_pct": delta_pct,
            "avg_a_ns": avg_a,
            "avg_b_ns": avg_b,
            "noise_ns": noise_ns,
            "matched_by": matched_by,
            "kind": kind,
            "op": op,
            "name_a": name_a,
            "name_b": name_b,
            "groups_a": na,
            "groups_b": nb,
            "replaced_by": np.full(nrows, "", dtype=object),
            "replaces": np.full(nrows, "", dtype=object),
            "fusion_set": np.zeros(nrows, dtype=np.int64),
            "precision_a": _representative(ga, m.row_a, nrows, "precision"),
            "precision_b": _representative(gb, m.row_b, nrows, "precision"),
            "launches_per_step_a": np.full(nrows, np.nan),
            "launches_per_step_b": np.full(nrows, np.nan),
            "step_a_ns": np.full(nrows, np.nan),
            "step_b_ns": np.full(nrows, np.nan),
            "delta_step_ns": np.full(nrows, np.nan),
            "delta_step_pct": np.full(nrows, np.nan),
        },
        columns=DIFF_COLUMNS,
    )
    _link_fused(table, ga, gb, m, by_op)
    order = np.lexsort((table["name"].to_numpy(dtype=str), -np.abs(table["delta_ns"].to_numpy())))
    table = table.iloc[order].reset_index(drop=True)
    # the pooled per-launch variances, for a per-step noise (not columns of the table)
    table.attrs["var_a"] = var_a[order]
    table.attrs["var_b"] = var_b[order]
    # fusion sets numbered in the order they appear in the sorted table
    sets = table["fusion_set"].to_numpy()
    renum: dict[int, int] = {}
    for s in sets:
        if s and s not in renum:
            renum[int(s)] = len(renum) + 1
    table["fusion_set"] = np.array([renum.get(int(s), 0) for s in sets], dtype=np.int64)
    return table, order


def _labels(name_a: np.ndarray, name_b: np.ndarray, variant_a: np.ndarray, variant_b: np.ndarray, op: np.ndarray,
            kind: np.ndarray, matched_by: np.ndarray, launch: np.ndarray) -> np.ndarray:
    """Readable row labels: what the row's kernels have in common, then the op."""
    labels = []
    for na, nb, va, vb, o, kd, level in zip(name_a, name_b, variant_a, variant_b, op, kind, matched_by):
        if level.startswith("kind"):
            base = f"{kd} kernels"
        elif level == "op":
            base = "kernels"
        elif level.startswith("variant") or (na and nb and short_name(na) != short_name(nb)):
            base = va if va == vb else f"{va} / {vb}"
        else:
            # the normalised name: no Triton index suffix, no template arguments
            base = short_name(matching.normalise_kernel_name(na or nb))
        labels.append(f"{base} [{o}]" if o and o != base else base)
    out = np.array(labels, dtype=object)
    # labels that coincide (one template kernel instantiated for several functors, or launched
    # with several grids) get the telling template argument, then the launch size
    for i in np.flatnonzero(pd.Series(out).duplicated(keep=False).to_numpy()):
        hint = "" if matched_by[i] in ("kind+op", "kind", "op") else template_hint(name_a[i] or name_b[i])
        if hint:
            base, sep, rest = out[i].partition(" [")
            out[i] = f"{base}<{hint}>{sep}{rest}"
    for i in np.flatnonzero(pd.Series(out).duplicated(keep=False).to_numpy()):
        if launch[i]:
            out[i] = f"{out[i]} {launch[i]}"
    return out


def _short_shapes(text: str) -> str:
    """``[[4, 1024, 2048], [2048], []]`` -> ``4x1024x2048, 2048`` (the op's tensor inputs)."""
    try:
        dims = json.loads(text)
    except ValueError:
        return text
    parts = ["x".join(str(d) for d in x) for x in dims if isinstance(x, list) and x and all(isinstance(d, int) for d in x)]
    return "(" + ", ".join(parts) + ")" if parts else ""


#: template arguments that say nothing about what a kernel instance computes
_HINT_SKIP = frozenset({"float", "double", "int", "bool", "char", "half", "long", "short", "unsigned", "BFloat16", "Half",
                        "array", "TensorListMetadata", "TensorListScalarListMetadata", "OpaqueType", "TrivialOffsetCalculator",
                        "OffsetCalculator", "true", "false", "unsigned int", "float4", "multiplies", "plus", "minus", "divides"})


def template_hint(name: str) -> str:
    """The first telling template argument of a kernel, e.g. ``CUDAFunctor_add`` for
    ``vectorized_elementwise_kernel<8, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3>>``."""
    norm = matching.normalise_kernel_name(name)
    if "<" not in norm:
        return ""
    inner = norm[norm.index("<") + 1 : norm.rindex(">")] if norm.endswith(">") else ""
    for arg in matching.split_top_level(inner, ","):
        parts = [p for p in matching.drop_templates(arg).split("::") if p.isidentifier()]
        for word in reversed(parts):
            if word not in _HINT_SKIP and word not in ("at", "native", "std", "c10", "detail", "cuda"):
                return word
    return ""


def _link_fused(table: pd.DataFrame, ga: pd.DataFrame, gb: pd.DataFrame, m: matching.Matching, by_op: bool) -> None:
    """Mark rows found in one report whose work the other report does in fused kernels."""
    side = table["status"].to_numpy(dtype=object)

    def members(g: pd.DataFrame, row_of: np.ndarray, row: int) -> tuple[list[str], list[str]]:
        sel = row_of == row
        return g["name"].to_numpy(dtype=object)[sel].tolist(), g["op"].to_numpy(dtype=object)[sel].tolist()

    def fused_strings(names: list[str], ops: list[str]) -> list[str]:
        found = [matching.fused_ops(x) for x in names + [o for o in ops if o]]
        return [f for f in found if f]

    only_a = [r for r in range(len(table)) if side[r] == ONLY_A]
    only_b = [r for r in range(len(table)) if side[r] == ONLY_B]
    info_a = {r: members(ga, m.row_a, r) for r in only_a}
    info_b = {r: members(gb, m.row_b, r) for r in only_b}
    fused_a = {r: fused_strings(*info_a[r]) for r in only_a}
    fused_b = {r: fused_strings(*info_b[r]) for r in only_b}
    links: list[tuple[int, int]] = []  # (row only in A, row only in B)
    for unfused, fused, a_is_unfused in ((info_a, fused_b, True), (info_b, fused_a, False)):
        for r, (names, ops) in unfused.items():
            if (fused_a if a_is_unfused else fused_b).get(r):
                continue  # a fused kernel does not replace another fused kernel here
            op = ops[0] if ops and len(set(ops)) == 1 else ""
            for f_row, strings in fused.items():
                if any(matching.fused_into(op, names, s) for s in strings):
                    links.append((r, f_row) if a_is_unfused else (f_row, r))
    if not links:
        return
    labels = table["name"].to_numpy(dtype=object)
    status = table["status"].to_numpy(dtype=object).copy()
    replaced_by: dict[int, list[str]] = {}
    replaces: dict[int, list[str]] = {}
    parent: dict[tuple[str, int], tuple[str, int]] = {}

    def find(x: tuple[str, int]) -> tuple[str, int]:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    for ra, rb in links:
        replaced_by.setdefault(ra, []).append(labels[rb])
        replaces.setdefault(rb, []).append(labels[ra])
        parent[find(("a", ra))] = find(("b", rb))
    for ra, lst in replaced_by.items():
        status[ra] = REPLACED
        table.at[ra, "replaced_by"] = "; ".join(sorted(set(lst)))
    for rb, lst in replaces.items():
        status[rb] = REPLACEMENT
        table.at[rb, "replaces"] = "; ".join(sorted(set(lst)))
    table["status"] = status
    roots: dict[tuple[str, int], int] = {}
    fusion = np.zeros(len(table), dtype=np.int64)
    for key in list(parent):
        root = find(key)
        fusion[key[1]] = roots.setdefault(root, len(roots) + 1)
    table["fusion_set"] = fusion


def _fusion_table(groups: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for s, part in groups[groups["fusion_set"] > 0].groupby("fusion_set", sort=True):
        ta = int(part["total_a_ns"].sum())
        tb = int(part["total_b_ns"].sum())
        rows.append(
            {
                "fusion_set": int(str(s)),
                "rows_a": "; ".join(part.loc[part["total_a_ns"] > 0, "name"]),
                "rows_b": "; ".join(part.loc[part["total_b_ns"] > 0, "name"]),
                "total_a_ns": ta,
                "total_b_ns": tb,
                "delta_ns": tb - ta,
                "delta_pct": (tb - ta) / ta * 100.0 if ta else math.nan,
            }
        )
    if not rows:
        return pd.DataFrame({c: pd.Series(dtype=object if c.startswith("rows") else (np.float64 if c == "delta_pct" else np.int64)) for c in FUSION_COLUMNS})
    return pd.DataFrame(rows, columns=FUSION_COLUMNS)


def _op_table(a: Trace, b: Trace, ops_a: np.ndarray, ops_b: np.ndarray, shapes_a: np.ndarray, shapes_b: np.ndarray,
              noise: NoiseModel, prec_a: np.ndarray, prec_b: np.ndarray) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """Kernels grouped by the op that launched them, matched by op name."""
    # one group per op: the kernel name does not take part in the key
    ga, group_a = _op_groups(a, ops_a, shapes_a, prec_a)
    gb, group_b = _op_groups(b, ops_b, shapes_b, prec_b)
    m = matching.match_groups(ga, gb, [matching.Level("op", ("op",))])
    table, order = _diff_table(ga, gb, m, noise, by_op=True)
    inverse = np.empty(len(order), dtype=np.int64)
    inverse[order] = np.arange(len(order))
    row_a = inverse[m.row_a[group_a]] if len(group_a) else np.zeros(0, dtype=np.int64)
    row_b = inverse[m.row_b[group_b]] if len(group_b) else np.zeros(0, dtype=np.int64)
    return table[OP_COLUMNS].copy(), row_a, row_b


def _op_groups(t: Trace, ops: np.ndarray, shapes: np.ndarray, prec: np.ndarray) -> tuple[pd.DataFrame, np.ndarray]:
    norm_ops = np.array([matching.normalise_op(o) for o in ops], dtype=object)
    g, group_of = matching.kernel_groups(t, norm_ops, MatchOptions(use_launch=False), shapes, prec)
    # fold the (name, op, precision) groups into one group per op and precision, keeping the top kernel as its name
    if not len(g):
        return g, group_of
    # the per-op table stays one row per op (its precision columns name the op's main precision);
    # precision splits the kernel-group table, where pairs are made
    key, _ = pd.factorize(g["op"].astype(str))
    folded = []
    for i in range(int(key.max()) + 1):
        part = g[key == i].sort_values("total_ns", ascending=False, kind="stable")
        op = part["op"].iloc[0]
        folded.append(
            {
                "precision": part["precision"].iloc[0],
                "shapes": "",
                "norm": op,
                "op": op,
                "launch": "",
                "variant": op,
                "kind": part["kind"].iloc[0],
                "name": part["name"].iloc[0],
                "count": int(part["count"].sum()),
                "total_ns": int(part["total_ns"].sum()),
                "ss": float(part["ss"].sum()),
                "nsub": int(part["nsub"].sum()),
            }
        )
    return pd.DataFrame(folded, columns=matching.GROUP_COLUMNS), key[group_of].astype(np.int64)


# ---------------------------------------------------------------------------------------------
# totals, steps, alignment


def _kernel_span(t: Trace) -> int:
    k = t.kernels
    if not len(k):
        return 0
    return int(k["end"].max()) - int(k["start"].min())


def _busy(t: Trace) -> int:
    k = t.kernels
    return busy_ns(k["start"].to_numpy(), k["end"].to_numpy(), k["device"].to_numpy())


def _totals(a: Trace, b: Trace, total_a: int, total_b: int, matched_a: int, matched_b: int, steps_a: pd.DataFrame, steps_b: pd.DataFrame) -> pd.DataFrame:
    def count(t: Trace) -> float:
        return float(t.kernel_stats["count"].sum()) if t.stats_only else float(len(t.kernels))

    def timed(t: Trace, f: Callable[[Trace], int]) -> float:
        return math.nan if t.stats_only else float(f(t))  # a summary file has no times: unknown

    rows: list[tuple[str, str, float, float]] = [
        ("kernel time", "ns", total_a, total_b),
        ("kernel count", "", count(a), count(b)),
        ("GPU busy time", "ns", timed(a, _busy), timed(b, _busy)),
        ("GPU span", "ns", timed(a, _kernel_span), timed(b, _kernel_span)),
        ("matched kernel time", "ns", matched_a, matched_b),
    ]
    if len(steps_a) and len(steps_b):
        rows.append(("steps", "", len(steps_a), len(steps_b)))
        sa = steps_a["gpu_span"].to_numpy(dtype=np.float64)
        sb = steps_b["gpu_span"].to_numpy(dtype=np.float64)
        rows.append(("step GPU span, median", "ns", float(np.median(sa)), float(np.median(sb))))
        rows.append(("step GPU span, mean", "ns", float(sa.mean()), float(sb.mean())))
    out = pd.DataFrame(rows, columns=["metric", "unit", "a", "b"])
    out["a"] = out["a"].astype(np.float64)
    out["b"] = out["b"].astype(np.float64)
    out["delta"] = out["b"] - out["a"]
    with np.errstate(invalid="ignore", divide="ignore"):
        out["delta_pct"] = np.where(out["a"] != 0, out["delta"] / out["a"].where(out["a"] != 0, 1.0) * 100.0, np.nan)
    return out[TOTAL_COLUMNS]


def _pair_steps(sa: pd.DataFrame, sb: pd.DataFrame) -> pd.DataFrame:
    n = min(len(sa), len(sb))
    ga = sa["gpu_span"].to_numpy(dtype=np.int64)[:n]
    gb = sb["gpu_span"].to_numpy(dtype=np.int64)[:n]
    with np.errstate(invalid="ignore", divide="ignore"):
        pct = np.where(ga > 0, (gb - ga) / np.maximum(ga, 1) * 100.0, np.nan)
    return pd.DataFrame(
        {
            "position": np.arange(n, dtype=np.int64),
            "step_a": sa["name"].to_numpy(dtype=object)[:n],
            "step_b": sb["name"].to_numpy(dtype=object)[:n],
            "gpu_span_a": ga,
            "gpu_span_b": gb,
            "delta_ns": gb - ga,
            "delta_pct": pct,
            "kernel_ns_a": sa["kernel_ns"].to_numpy(dtype=np.int64)[:n],
            "kernel_ns_b": sb["kernel_ns"].to_numpy(dtype=np.int64)[:n],
            "kernel_count_a": sa["kernel_count"].to_numpy(dtype=np.int64)[:n],
            "kernel_count_b": sb["kernel_count"].to_numpy(dtype=np.int64)[:n],
        },
        columns=STEP_PAIR_COLUMNS,
    )


def _align(a: Trace, b: Trace, steps_a: pd.DataFrame, steps_b: pd.DataFrame) -> tuple[int, str]:
    if len(steps_a) and len(steps_b):
        return int(steps_a["start"].iloc[0]) - int(steps_b["start"].iloc[0]), "first step"
    if len(a.kernels) and len(b.kernels):
        return int(a.kernels["start"].iloc[0]) - int(b.kernels["start"].iloc[0]), "first kernel"
    return 0, "none"
