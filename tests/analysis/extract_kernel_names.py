"""Extract real kernel names from every sample, for the hand-checked table of kernel kinds.

Run from the repository root (``python tests/analysis/extract_kernel_names.py > names.tsv``): it
loads every file of ../shared/samples and sample_traces, keeps one name per kernel *variant*
(:func:`kviewer.analysis.matching.normalise_kernel_name` without its digits: tile sizes and counts
dropped, template arguments kept, so a FillFunctor and an add kernel stay apart) so the table stays
diverse, and prints ``kind<TAB>sample<TAB>name`` with the classifier's current kind
in the first column. That column is only a starting point: every row of
``data/kernel_kinds.tsv`` was then checked by hand against what the kernel does, and the test
(test_kinds.py) compares the classifier with the hand-checked column.
"""

from __future__ import annotations

import sys
from pathlib import Path

from kviewer.analysis.kinds import name_kind
import re

from kviewer.analysis.matching import normalise_kernel_name
from kviewer.errors import KViewerError
from kviewer.io.registry import load

ROOT = Path(__file__).resolve().parents[2]
PER_SAMPLE = 45


def main() -> None:
    files = sorted(p for p in (ROOT.parent / "shared" / "samples").rglob("*") if p.is_file() and p.suffix not in (".md", ".py", ".txt"))
    files += sorted((ROOT / "sample_traces").glob("*.gz"))
    seen: set[str] = set()
    for path in files:
        try:
            trace = load(path)
        except KViewerError:
            continue
        picked = 0
        for name in dict.fromkeys(trace.kernels["name"].astype(str)):
            key = re.sub(r"\d+", "", normalise_kernel_name(name))
            if key in seen or "\t" in name or "\n" in name:
                continue
            seen.add(key)
            rel = path.relative_to(ROOT.parent / "shared" / "samples") if "shared" in path.parts else Path("sample_traces") / path.name
            sys.stdout.write(f"{name_kind(name)}\t{rel}\t{name}\n")
            picked += 1
            if picked >= PER_SAMPLE:
                break


if __name__ == "__main__":
    main()
