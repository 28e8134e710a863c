"""Which kernels are communication (NCCL / RCCL collectives and point-to-point transfers), and
which communication kernels of several ranks are the same collective (:func:`match_collectives`).

``kviewer fleet`` splits GPU time into communication and compute with this predicate; the rule
itself is the kernel taxonomy's (:func:`kviewer.analysis.kinds.kernel_kind`), evaluated once per
distinct name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from kviewer.analysis.kinds import kernel_kind
from kviewer.core import Diagnostic, Trace


def _comm(names: pd.Series) -> np.ndarray:
    return np.array([kernel_kind(str(n)) == "communication" for n in names], dtype=bool)


def is_communication(names: pd.Series | np.ndarray) -> np.ndarray:
    """True for each kernel name that is a collective / transfer kernel of NCCL or RCCL."""
    s = pd.Series(names)
    if isinstance(s.dtype, pd.CategoricalDtype):
        hit = _comm(s.cat.categories.to_series())
        codes = s.cat.codes.to_numpy()
        return np.where(codes >= 0, hit[np.clip(codes, 0, None)] if len(hit) else False, False)
    uniq, inverse = np.unique(s.astype(str).to_numpy(), return_inverse=True)
    return _comm(pd.Series(uniq))[inverse] if len(uniq) else np.zeros(0, dtype=bool)


# ---------------------------------------------------------------------------------------------
# the same collective on every rank

#: a matched collective is consistent when every member was still running when the last rank
#: started its part (an all-reduce cannot finish before every rank joined), within this much
#: clock disagreement between ranks
SKEW_NS = 100_000
#: the share of a (collective, process group)'s matches that must be consistent for any of its
#: edges to be kept
CONSISTENT_SHARE = 0.9

_NCCL_OP = re.compile(r"(?:nccl|rccl)(?:Dev)?Kernel_([A-Za-z]+)", re.IGNORECASE)


@dataclass(frozen=True)
class CollectiveMatch:
    """Which communication kernels of different ranks are one collective.

    ``group`` holds, for every kernels row, the id (0..n_groups-1) of the collective it is a
    part of, -1 when it is not matched (not communication, one rank only, or left out: see
    ``diagnostics``). A group has at most one kernel per rank and at least two ranks.
    """

    group: np.ndarray
    n_groups: int
    by: str
    """"seq" when the framework's sequence numbers matched them, "order" when their order on
    the process group did, "" when nothing was matched"""
    diagnostics: list[Diagnostic] = field(default_factory=list)


def _op_names(k: pd.DataFrame, comm: np.ndarray) -> np.ndarray:
    """The collective of each kernel: the recorded one, else the operation in an NCCL/RCCL
    kernel name (``ncclDevKernel_AllReduce_Sum_f32_RING_LL`` -> allreduce), else the short name."""
    coll = k["collective"].astype(str).to_numpy() if "collective" in k else np.full(len(k), "", dtype=object)
    short = k["short_name"].astype("category")
    cats = [str(x) for x in short.cat.categories]
    from_name = []
    for n in cats:
        m = _NCCL_OP.search(n)
        from_name.append(m.group(1).lower() if m else n)
    named = np.asarray(from_name + [""], dtype=object)[short.cat.codes.to_numpy()]
    out = np.where(coll != "", np.char.lower(coll.astype(str)).astype(object), named)
    return np.where(comm, out, "")


def match_collectives(trace: Trace, comm: np.ndarray | None = None) -> CollectiveMatch:
    """Match every communication kernel with the same collective on the other ranks of ``trace``.

    Kernels are keyed by (collective, process group, sequence number) when the framework
    recorded them (Kineto copies ``Collective name``, ``Process Group Name`` and ``Seq`` onto the
    NCCL kernel), else by (collective, process group) and their order on it: the n-th all-reduce
    of group 0 on rank 0 is the n-th on rank 1. The match is then checked on data, per
    (collective, process group): every rank must have the same number of them (by order), and
    each match must overlap in time (:data:`SKEW_NS`) for at least :data:`CONSISTENT_SHARE` of
    them. What fails a check is left unmatched with an ``unmatched_collectives`` diagnostic: the
    traces of ranks that were not one job get no invented dependency. ``comm``: which kernels are
    communication, when the caller already knows (else :func:`is_communication` of their names).
    """
    k = trace.kernels
    n = len(k)
    none = CollectiveMatch(np.full(n, -1, dtype=np.int64), 0, "")
    if not n:
        return none
    rank = k["rank"].to_numpy(np.int64)
    if len(np.unique(rank[rank >= 0])) < 2:  # one rank: nothing to match (and nothing to compute)
        return none
    coll = k["collective"].astype(str).to_numpy() if "collective" in k else np.full(n, "", dtype=object)
    comm = ((is_communication(k["name"]) if comm is None else comm) | (coll != "")) & (rank >= 0)
    if len(np.unique(rank[comm])) < 2:
        return none
    rows = np.flatnonzero(comm)
    op = _op_names(k, comm)[rows]
    pg = (k["process_group"].astype(str).to_numpy() if "process_group" in k else np.full(n, "", dtype=object))[rows]
    seq = (k["collective_seq"].to_numpy(np.int64) if "collective_seq" in k else np.full(n, -1, dtype=np.int64))[rows]
    r = rank[rows]
    start = k["start"].to_numpy(np.int64)[rows]
    end = k["end"].to_numpy(np.int64)[rows]
    path = trace.meta.path
    # occurrence of each kernel among the kernels of its rank with the same (op, group, seq)
    frame = pd.DataFrame({"op": op, "pg": pg, "seq": seq, "rank": r, "start": start})
    frame = frame.sort_values("start", kind="stable")
    occ = np.empty(len(rows), dtype=np.int64)
    occ[frame.index.to_numpy()] = frame.groupby(["op", "pg", "seq", "rank"], sort=False).cumcount().to_numpy()
    frame = pd.DataFrame({"op": op, "pg": pg, "seq": seq, "occ": occ, "rank": r, "start": start, "end": end})
    ranks_all = np.unique(r)
    diags: list[Diagnostic] = []
    group = np.full(n, -1, dtype=np.int64)
    next_id = 0
    used_seq = used_order = False
    for (o, g), part in frame.groupby(["op", "pg"], sort=True):
        by_seq = bool((part["seq"] >= 0).all())
        counts = part.groupby("rank").size()
        label = f"{o}" + (f" on process group {g}" if g else "")
        if not by_seq and (len(counts) < len(ranks_all) or counts.nunique() > 1):
            per = ", ".join(f"rank {a}: {b}" for a, b in zip(counts.index.tolist(), counts.tolist()))
            diags.append(Diagnostic.warning("unmatched_collectives", path, f"{len(part)} {label} kernel(s) not matched across ranks: "
                                            f"the ranks ran different numbers of them ({per}) and no sequence numbers say which is which"))
            continue
        keys = part.groupby(["seq", "occ"], sort=False).ngroup().to_numpy()
        sizes = np.bincount(keys)
        ok = sizes[keys] >= 2  # a collective seen on one rank only has nothing to wait for
        if not ok.any():
            continue
        sub = part[ok]
        kk = keys[ok]
        last = pd.Series(sub["start"].to_numpy()).groupby(kk).transform("max").to_numpy()
        consistent = sub["end"].to_numpy() + SKEW_NS >= last
        per_key = pd.Series(consistent).groupby(kk).all()
        if per_key.mean() < CONSISTENT_SHARE:
            diags.append(Diagnostic.warning("unmatched_collectives", path, f"{len(part)} {label} kernel(s) not matched across ranks: "
                                            f"{int((~per_key).sum())} of {len(per_key)} matches do not overlap in time (the ranks do not "
                                            "look like one job, or their clocks disagree by more than "
                                            f"{SKEW_NS / 1e3:.0f} us)"))
            continue
        ids = pd.factorize(kk)[0] + next_id
        next_id = int(ids.max()) + 1
        group[rows[sub.index.to_numpy()]] = ids
        used_seq |= by_seq
        used_order |= not by_seq
    by = "seq" if used_seq and not used_order else ("order" if used_order and not used_seq else ("seq+order" if used_seq else ""))
    return CollectiveMatch(group, next_id, by, diags)
