"""`kviewer memory` and `kviewer graphs` against `kviewer summary` on the same file, in one run.

What each command does after the command line is parsed: load what it reads (``tables=``, no
trace cache) and compute. Figures go to BENCHMARKS.md ("What the profiler recorded"); the ratio
is the number to watch (target: within 1.5x of summary).

    PYTHONPATH=. python tests/bench/bench_recorded.py [FILE ...]
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ["KVIEWER_NO_CACHE"] = "1"

from kviewer.analysis.graphs import GRAPHS_READS, graph_summary  # noqa: E402
from kviewer.analysis.memory import MEMORY_READS, memory_summary  # noqa: E402
from kviewer.analysis.summary import SUMMARY_READS, kernel_summary  # noqa: E402
from kviewer.io import load  # noqa: E402
from tests.bench._timing import best_of  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("KVIEWER_SAMPLES", REPO.parent / "shared" / "samples"))
DEFAULT = [
    REPO / "sample_traces" / "gpt_train_memory.pt.trace.json.gz",
    REPO / "sample_traces" / "mlp_graph.pt.trace.json.gz",
    SHARED / "torch" / "h200_llm_train_big.pt.trace.json.xz",
    SHARED / "nsys" / "h200_llm_train_nvtx.sqlite",
]


def main(argv: list[str]) -> None:
    files = [Path(a) for a in argv] or [p for p in DEFAULT if p.exists()]
    print(f"load average {open('/proc/loadavg').read().split()[0]}")
    for path in files:
        repeat = 1 if path.stat().st_size > 20_000_000 else 3
        t_sum = best_of(lambda: kernel_summary(load(path, tables=SUMMARY_READS)), repeat)
        t_mem = best_of(lambda: memory_summary(load(path, tables=MEMORY_READS)), repeat)
        t_gr = best_of(lambda: graph_summary(load(path, tables=GRAPHS_READS)), repeat)
        print(f"{path.name}: summary {t_sum:.3f} s, memory {t_mem:.3f} s ({t_mem / t_sum:.2f}x), graphs {t_gr:.3f} s ({t_gr / t_sum:.2f}x)")


if __name__ == "__main__":
    main(sys.argv[1:])
