"""What every ``--help`` page ends with: examples, and the environment variables that change the
command. The one table of kviewer's environment variables is :data:`ENVIRONMENT`; each subcommand
names those that apply to it in :data:`APPLIES`, and its examples are in :data:`EXAMPLES` (a test
parses every example with the real parser and checks each variable against the code that reads it).

Options travel as arguments; these variables are for what a user sets once for a machine or a
session (where the cache lives, how much memory a load may take), never set by kviewer itself.
"""

from __future__ import annotations

import argparse
import textwrap
from dataclasses import dataclass


@dataclass(frozen=True)
class EnvVar:
    name: str
    what: str
    read_by: str
    """the module that reads it (relative to the repository root; a test checks that it does)"""


#: every environment variable kviewer reads, in the order the top-level help lists them
ENVIRONMENT: tuple[EnvVar, ...] = (
    EnvVar("KVIEWER_CACHE_DIR", "the trace cache's folder (default $XDG_CACHE_HOME/kviewer, else ~/.cache/kviewer)",
           "kviewer/io/cache/keys.py"),
    EnvVar("KVIEWER_NO_CACHE", "1: neither read nor write the trace cache (as --no-cache)", "kviewer/io/cache/keys.py"),
    EnvVar("KVIEWER_CACHE_MAX_BYTES", "the trace cache's bound, e.g. 500M (default 2G; least recently used first out)",
           "kviewer/io/cache/keys.py"),
    EnvVar("KVIEWER_MAX_MEMORY", "the memory budget of a load: 8G, 500M or 60% (default 60% of physical memory); "
           "past it the load stops with an error", "kviewer/io/memory.py"),
    EnvVar("KVIEWER_MAX_DECOMPRESSED", "the most bytes one compressed file may unpack to, e.g. 2G", "kviewer/io/source.py"),
    EnvVar("KVIEWER_RANK_WORKERS", "processes loading the ranks of a folder (1: in this process; default one per core)",
           "kviewer/io/ranks.py"),
    EnvVar("KVIEWER_NSYS", "the nsys executable that exports a .nsys-rep to SQLite (default: nsys on PATH)",
           "kviewer/io/nsys_rep.py"),
    EnvVar("KVIEWER_MAX_URL_BYTES", "fleet: the most bytes one URL input may bring, e.g. 2G "
           "(default KVIEWER_MAX_DECOMPRESSED's cap)", "kviewer/fleet/record.py"),
    EnvVar("KVIEWER_WINDOW_SIZE", "desktop app: the window's size, WIDTHxHEIGHT (e.g. 1600x1000)", "kviewer/ui/app.py"),
    EnvVar("KVIEWER_SCREENSHOT", "desktop app: open the files, save the window as this picture (.png/.svg) and quit",
           "kviewer/ui/app.py"),
    EnvVar("KVIEWER_SAMPLES", "tests and benchmarks only: the folder of shared sample traces", "tests/conftest.py"),
    EnvVar("KVIEWER_STRESS_CYCLES", "tests only: cycles of the window's stress test (default 200)", "tests/ui/test_stress.py"),
)

ENV_BY_NAME = {v.name: v for v in ENVIRONMENT}

#: what every command that loads a trace reads
_LOAD = ("KVIEWER_MAX_MEMORY", "KVIEWER_MAX_DECOMPRESSED", "KVIEWER_RANK_WORKERS", "KVIEWER_NSYS")
_CACHE = ("KVIEWER_CACHE_DIR", "KVIEWER_NO_CACHE", "KVIEWER_CACHE_MAX_BYTES")

#: subcommand -> the variables that change what it does
APPLIES: dict[str, tuple[str, ...]] = {
    **{name: _CACHE + _LOAD for name in (
        "info", "summary", "stats", "kernels", "sol", "fusion", "compare", "screenshot", "report", "export", "sql",
        "critpath", "whatif", "graphs", "memory", "calltree")},
    "fleet": ("KVIEWER_MAX_MEMORY", "KVIEWER_MAX_DECOMPRESSED", "KVIEWER_NSYS", "KVIEWER_MAX_URL_BYTES"),  # never cached
}  # fmt: skip

#: what the desktop app (``kviewer [FILE ...]``) reads besides the loading variables
GUI_ENV = ("KVIEWER_WINDOW_SIZE", "KVIEWER_SCREENSHOT")

#: subcommand -> (command line, what it does); every line is parsed by a test
EXAMPLES: dict[str, tuple[tuple[str, str], ...]] = {
    "": (
        ("kviewer run.pt.trace.json.gz", "open a trace in the desktop app"),
        ("kviewer a.sqlite b.sqlite", "open two traces in one window"),
        ("kviewer summary report.nsys-rep", "the top kernels, without a display"),
    ),
    "info": (
        ("kviewer info run.pt.trace.json.gz", "format, tool, GPUs and table sizes"),
        ("kviewer info timeline.sqlite kernels.ncu-rep", "how the report's kernels match the timeline's"),
    ),
    "summary": (
        ("kviewer summary run.pt.trace.json.gz", "kernels by total time, as nsys stats cuda_gpu_kern_sum"),
        ("kviewer summary ranks/ --steps", "step times across the ranks of a folder, and the straggler"),
        ("kviewer summary run.sqlite --range 1.2s:1.25s --format json", "what a time range holds"),
    ),
    "stats": (
        ("kviewer stats run.pt.trace.json.gz -r cuda_gpu_kern_sum,cuda_api_sum", "nsys stats reports for any trace"),
        ("kviewer stats report.sqlite -r cuda_gpu_trace -f csv -o out", "write out_cuda_gpu_trace.csv"),
    ),
    "kernels": (
        ("kviewer kernels run.pt.trace.json.gz --format csv > kernels.csv", "one row per kernel"),
        ("kviewer kernels run.sqlite --ncu counters.ncu-rep --format json", "with measured counters attached"),
    ),
    "sol": (
        ("kviewer sol run.pt.trace.json.gz", "speed of light per kernel"),
        ("kviewer sol run.sqlite --device H100 --format csv", "for a GPU the trace does not name"),
    ),
    "fusion": (
        ("kviewer fusion run.pt.trace.json.gz", "fusion candidates, biggest saving first"),
        ("kviewer fusion run.pt.trace.json.gz --format json", "with every instance's kernel ids"),
    ),
    "compare": (
        ("kviewer compare eager.pt.trace.json.gz compiled.pt.trace.json.gz", "B against A"),
        ("kviewer compare base.sqlite new.sqlite --fail-if-slower 2", "exit 1 when B is over 2% slower (CI)"),
    ),
    "screenshot": (
        ("kviewer screenshot run.pt.trace.json.gz -o timeline.png --view timeline", "a picture of the timeline"),
        ("kviewer screenshot a.sqlite b.sqlite -o diff.svg --view compare --size 1600x1000", "a comparison"),
    ),
    "report": (
        ("kviewer report run.pt.trace.json.gz -o review.html", "a self-contained review document"),
        ("kviewer report a.sqlite b.sqlite -o review.md --no-pictures", "two compared, tables only"),
    ),
    "export": (
        ("kviewer export run.pt.trace.json.gz -o run.db", "the unified tables as SQLite"),
        ("kviewer export ranks/ -o job.db --no-analysis", "without the SOL and fusion tables"),
    ),
    "sql": (
        ("kviewer sql run.sqlite \"select name, count(*) from kernels group by name\"", "SQL over the unified tables"),
        ("kviewer sql a.json.gz b.json.gz \"select * from kernels limit 5\" --format csv", "over two traces"),
    ),
    "fleet": (
        ("kviewer fleet runs/ -o fleet_out", "summaries of every trace in a folder, with a report"),
        ("kviewer fleet s3://bucket/runs/ -o out --baseline run_001 --fail-if-slower 5", "against a baseline run"),
    ),
    "critpath": (
        ("kviewer critpath run.pt.trace.json.gz", "the critical path of the median step"),
        ("kviewer critpath run.sqlite --step step_3 --format json", "of one step"),
    ),
    "whatif": (
        ("kviewer whatif run.pt.trace.json.gz --fuse all", "the step time if the fusion candidates were fused"),
        ("kviewer whatif run.pt.trace.json.gz --cuda-graphs --no-sync", "without launch gaps and syncs"),
    ),
    "graphs": (("kviewer graphs run.sqlite", "the CUDA graphs the trace launched"),),
    "memory": (
        ("kviewer memory run.pt.trace.json.gz", "GPU memory over time: peaks and allocations"),
        ("kviewer memory run.pt.trace.json.gz --host --format csv", "host memory too"),
    ),
    "calltree": (
        ("kviewer calltree run.pt.trace.json.gz > folded.txt", "folded stacks (flamegraph.pl, speedscope)"),
        ("kviewer calltree run.pt.trace.json.gz --format json --max-depth 6", "a JSON tree, six levels deep"),
    ),
}  # fmt: skip


def _examples(pairs: tuple[tuple[str, str], ...]) -> list[str]:
    """What each does, then the command line (copied as it is)."""
    out = []
    for command, what in pairs:
        out += [f"  {what}:", f"    {command}"]
    return out


def epilog(command: str) -> str:
    """The end of ``kviewer COMMAND --help`` (``command=""``: of ``kviewer --help``)."""
    parts = ["examples:", *_examples(EXAMPLES[command])]
    names = list(APPLIES.get(command, ())) if command else [v.name for v in ENVIRONMENT]
    if names:
        parts += ["", "environment:"]
        pad = max(len(n) for n in names) + 4
        for name in names:
            # a subcommand's page: the first clause; kviewer --help has the whole text
            what = ENV_BY_NAME[name].what if not command else ENV_BY_NAME[name].what.split(" (")[0].split(";")[0]
            text = textwrap.wrap(what, max(30, 78 - pad))
            parts.append(f"  {name.ljust(pad - 2)}{text[0]}")
            parts += [f"{' ' * pad}{t}" for t in text[1:]]
    if not command:
        parts += ["", "The desktop app also reads DISPLAY, WAYLAND_DISPLAY and QT_QPA_PLATFORM; "
                  "kviewer COMMAND --help names the variables each command reads."]
    return "\n".join(parts)


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, except that a line of a description or epilog that begins with a
    space is kept as it is (examples, tables); other lines are wrapped as usual, one by one."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        out = []
        for line in text.splitlines():
            if not line.strip():
                out.append("")
            elif line.startswith(" ") or line.endswith(":"):
                out.append(indent + line)
            else:
                out.append(super()._fill_text(line, width, indent))
        return "\n".join(out)
