"""Benchmark: comparing two reports (``kviewer.analysis.compare.compare``).

Run: ``python tests/bench/bench_compare.py`` (pairs from sample_traces/ and, when present,
../shared/samples).

The baseline, measured in the same run, is the cheapest comparison anyone would write: the
kernel summary of each report grouped by name (``kernel_summary``, a pandas groupby) and an
outer join of the two on the name. ``compare`` adds name normalisation, launch sizes and ops,
the matching ladder, noise, fused-kernel links, steps of both reports and the per-op table.
Loading is not timed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from kviewer.analysis.compare import compare
from kviewer.analysis.summary import kernel_summary
from kviewer.io import load
from _timing import best_of  # noqa: E402  (tests/bench is sys.path[0] when run as a script)

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared" / "samples"


def naive(a: object, b: object) -> pd.DataFrame:
    sa = kernel_summary(a)[["name", "count", "total_ns"]]  # type: ignore[arg-type]
    sb = kernel_summary(b)[["name", "count", "total_ns"]]  # type: ignore[arg-type]
    return sa.merge(sb, on="name", how="outer", suffixes=("_a", "_b"))


def main() -> None:
    st = REPO / "sample_traces"
    pairs = [("eager vs compiled", st / "h200_llm_block_eager.pt.trace.json.gz", st / "h200_llm_block_compiled.pt.trace.json.gz")]
    if SHARED.is_dir():
        bert = "gaunernst_bert-small-uncased__1016001.json.gz"
        big = SHARED / "torch" / "h200_llm_train_big.pt.trace.json.xz"
        pairs += [
            ("H100 vs MI300X bert", SHARED / "torch" / "tracelens_h100" / bert, SHARED / "torch" / "tracelens_mi300" / bert),
            ("nsys vs torch (train)", st / "h200_llm_train_nvtx.sqlite.gz", big),
            ("torch train_big with itself", big, big),
        ]
    print(f"{'pair':<30} {'kernels A':>10} {'kernels B':>10} {'naive s':>8} {'compare s':>9} {'ratio':>6}")
    for label, pa, pb in pairs:
        a, b = load(pa), load(pb)
        base = best_of(lambda: naive(a, b))
        full = best_of(lambda: compare(a, b))
        print(f"{label:<30} {len(a.kernels):>10,} {len(b.kernels):>10,} {base:>8.3f} {full:>9.3f} {full / base:>5.1f}x")


if __name__ == "__main__":
    main()
    sys.exit(0)
