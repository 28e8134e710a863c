"""A/B of the two-command speed (issue 24): ``kviewer summary``, ``kviewer critpath`` and
``kviewer whatif --cuda-graphs`` on the 153 MB training trace, run interleaved from two source
trees (BEFORE, e.g. ``git archive <commit> | tar -x -C /tmp/before``, and this one), each in a
cache folder of its own (one folder for both would hold the big trace twice, past its bound, and
evict one for the other) whose trace cache is warm and whose analyses (graph, paths, SOL, MFU) are
stored (a file seen before). CPU time (user + system) of each process, best of N and median; the load
average around the runs.

Run: ``python tests/bench/ab_whatif_speed.py BEFORE [N]`` (the caches in a temporary folder)
(KVIEWER_SAMPLES names ../shared/samples when it is elsewhere).
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("KVIEWER_SAMPLES", REPO.parent / "shared" / "samples"))
BIG = SHARED / "torch" / "h200_llm_train_big.pt.trace.json.xz"
COMMANDS = (("summary",), ("critpath",), ("whatif", "--cuda-graphs"))
CACHES: dict[str, str] = {}


def run(tree: str, *args: str) -> float:
    """CPU seconds of one ``kviewer`` process from ``tree`` (its cache: CACHES[tree])."""
    env = dict(os.environ, PYTHONPATH=tree, KVIEWER_CACHE_DIR=CACHES[tree])
    env.pop("KVIEWER_NO_CACHE", None)
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-m", "kviewer", args[0], str(BIG), *args[1:], "-q"], check=True, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)


def main() -> None:
    trees = {"before": str(Path(sys.argv[1]).resolve()), "after": str(REPO)}
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    import tempfile

    top = tempfile.mkdtemp(prefix="kv-ab-")
    for name, tree in trees.items():  # the trace, then graph + paths (critpath), SOL + MFU (whatif)
        CACHES[tree] = os.path.join(top, name)
        run(tree, "info")
        run(tree, "critpath")
        run(tree, "whatif", "--cuda-graphs")
    print("load average before", open("/proc/loadavg").read().split()[:3])
    cpu: dict[tuple[str, str], list[float]] = {}
    for i in range(n):
        for cmd in COMMANDS:
            for name in (list(trees) if i % 2 == 0 else list(trees)[::-1]):
                cpu.setdefault((name, cmd[0]), []).append(run(trees[name], *cmd))
    print("load average after", open("/proc/loadavg").read().split()[:3])
    for name in trees:
        best = {c[0]: min(cpu[(name, c[0])]) for c in COMMANDS}
        med = {c[0]: sorted(cpu[(name, c[0])])[n // 2] for c in COMMANDS}
        print(f"{name}: best of {n} CPU: summary {best['summary']:.2f} s, critpath {best['critpath']:.2f} s + whatif "
              f"{best['whatif']:.2f} s = {(best['critpath'] + best['whatif']) / best['summary']:.2f}x; median: summary "
              f"{med['summary']:.2f}, critpath {med['critpath']:.2f} + whatif {med['whatif']:.2f} = "
              f"{(med['critpath'] + med['whatif']) / med['summary']:.2f}x")


if __name__ == "__main__":
    main()
