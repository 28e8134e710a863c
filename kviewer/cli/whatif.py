"""``kviewer whatif FILE [changes]``: projected step times after an optimisation
(a thin shell over :mod:`kviewer.analysis.whatif`)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from kviewer import analysis, session
from kviewer.cli import common
from kviewer.cli.common import EXIT_OK, add_command, cache_choice, dump_json, format_ns, print_warnings, wants_raw_csv, write_frame
from kviewer.errors import AnalysisError, UserError

if TYPE_CHECKING:
    import kviewer.analysis.mfu
    import kviewer.analysis.sol
    import kviewer.analysis.whatif
    import kviewer.session.analysis_cache
    import kviewer.session.graph_cache
    from kviewer.analysis.mfu import MfuResult
    from kviewer.analysis.sol import SolResult
    from kviewer.core import Trace

HELP = ("projected step time if kernel chains were fused, the steps ran as CUDA graphs, kernels reached a share of their "
        "speed of light, host syncs went away or a kernel ran faster: the dependency graph replayed with the change")


def register(sub: Any) -> None:
    p = add_command(sub, "whatif", HELP, cmd_whatif, ("table", "csv", "json"))
    p.add_argument("--fuse", metavar="all|ID[,ID...]", help="fuse these fusion candidates (ranks as kviewer fusion prints them)")
    p.add_argument("--cuda-graphs", action="store_true", help="each step's launches become one CUDA graph launch")
    p.add_argument("--sol", action="append", default=[], metavar="KIND=PCT",
                   help="kernels of KIND (gemm, attention, elementwise, norm, ...) run at PCT%% of their speed of light; repeatable")
    p.add_argument("--no-sync", nargs="?", const="", default=None, metavar="NAME",
                   help="host syncs no longer wait for the GPU (all, or those of the API call NAME)")
    p.add_argument("--kernel", action="append", default=[], metavar="NAME=FACTOR",
                   help="kernels named NAME (or containing it) run FACTOR times as long (e.g. 0.5); repeatable")
    p.add_argument("--channels-last", action="store_true",
                   help="the layout transforms around convolutions (cuDNN's nchwToNhwc / nhwcToNchw) go away: the tensors are "
                        "already channels_last (an op eager PyTorch runs only in NCHW, GroupNorm, InstanceNorm or pixel_shuffle, adds its copies into NCHW and back for "
                        "the convolution after it, at the rate PyTorch's strided copies ran on an H100)")
    p.add_argument("--step", metavar="NAME", help="use the ranges of this name as the steps")
    p.add_argument("--device", metavar="NAME", help="the GPU (for --sol and --fuse) when the trace does not say or to override it")


def changes_from_args(args: argparse.Namespace) -> Any:
    fuse: tuple[int, ...] | None = None
    if args.fuse is not None:
        text = args.fuse.strip()
        if text == "all":
            fuse = ()
        else:
            try:
                fuse = tuple(int(x) for x in text.split(",") if x.strip())
            except ValueError:
                raise UserError(f"--fuse: expected all or candidate numbers like 1,3 (see kviewer fusion), got {args.fuse!r}") from None
            if not fuse or min(fuse) < 1:
                raise UserError(f"--fuse: expected all or candidate numbers >= 1, got {args.fuse!r}")
    no_sync = None if args.no_sync is None else ((args.no_sync,) if args.no_sync else ())
    return analysis.whatif.Changes(fuse=fuse, cuda_graphs=bool(args.cuda_graphs), sol=tuple(analysis.whatif.parse_assignment(s, "--sol") for s in args.sol),
                   no_sync=no_sync, kernel=tuple(analysis.whatif.parse_assignment(s, "--kernel") for s in args.kernel),
                   channels_last=bool(args.channels_last))


def cmd_whatif(args: argparse.Namespace) -> int:
    import pandas as pd

    cached = cache_choice(args) is not False
    own_gpu = args.device is None and cached  # the trace's own GPU: its analyses may come from the cache
    sols: list[SolResult | None] = []

    def sol_of() -> SolResult | None:
        """The speed of light, once, when something needs it (--sol, --fuse, an MFU not cached)."""
        if not sols:
            assert trace is not None  # loaded whenever a change or the MFU needs the speed of light
            try:
                if not len(trace.kernels):
                    sols.append(None)
                elif own_gpu:
                    info = session.analysis_cache.sol_for_open(trace, trace.meta.source_id)
                    sols.append(info.result if info is not None else None)  # None: unknown GPU, as sol_result's error
                else:
                    sols.append(analysis.sol.sol_result(trace, args.device))
            except AnalysisError:  # a change that needs it says why; the MFU is unknown
                sols.append(None)
        return sols[0]

    trace: Trace | None = None
    mfu: MfuResult | None = None
    try:
        changes = changes_from_args(args)
        # a file seen before (by critpath, whatif or the window) and changes the graph alone
        # projects: its graph, steps, measured replay and MFU from the analysis cache, without
        # loading the trace
        base = None
        sid = None
        if own_gpu and not changes.reads_tables:
            sid = session.analysis_cache.identity(args.file)
            base = session.graph_cache.cached_base(sid, args.step)
            mfu = session.analysis_cache.cached_mfu(sid) if base is not None else None
        if base is not None and mfu is not None:  # the file is not loaded: its load warnings from the cached trace
            print_warnings(args.file, session.analysis_cache.cached_warnings(sid) or [])
        else:
            trace = common.load_for(args, args.file)
            # the graph, steps and measured replay: from the analysis cache when critpath (or a
            # whatif) built them before
            if base is None or base.graph.kernel_node.shape != (len(trace.kernels),):
                base = session.graph_cache.graph_base(trace, args.step, use_cache=cached)
        model = analysis.whatif.whatif_model(trace, step=args.step, device=args.device, sol=sol_of() if changes.sol or changes.fuse is not None else None,
                             base=(base.graph, base.windows, base.measured))
        proj = model.project(changes)
    except AnalysisError as exc:
        raise UserError(str(exc)) from exc

    for diag in model.graph.notes:  # collectives of several ranks that could not be matched: no edge drawn
        print(f"warning: {diag.message}", file=sys.stderr)

    # MFU beside the projected step time: the step's model FLOPs at the projected time (#31)
    if mfu is None:
        assert trace is not None  # loaded whenever the MFU was not read from the cache
        mfu = session.analysis_cache.mfu_for(trace, sol_of, trace.meta.source_id) if own_gpu else analysis.mfu.mfu_or_unknown(trace, args.device, sol_of())
    pm = analysis.mfu.projected_mfu(mfu, proj)
    def known(values: Any) -> list[float | None]:
        return [None if v != v else float(v) for v in values.to_numpy(dtype=float)]

    names = [str(n) for n in pm["name"]]
    mfu_now, mfu_then = dict(zip(names, known(pm["mfu"]))), dict(zip(names, known(pm["projected_mfu"])))
    if args.format == "json":
        doc: dict[str, Any] = proj.as_dict()
        for st in doc.get("steps", []):
            st["mfu"], st["projected_mfu"] = mfu_now.get(str(st["name"])), mfu_then.get(str(st["name"]))
        dump_json(doc)
        return EXIT_OK
    df = pd.DataFrame([{"step": s.name, "measured_ns": s.measured_ns, "projected_ns": s.projected_ns,
                        "delta_pct": (s.projected_ns - s.measured_ns) / s.measured_ns * 100.0 if s.measured_ns > 0 else float("nan"),
                        "mfu": mfu_now.get(s.name), "projected_mfu": mfu_then.get(s.name)}
                       for s in proj.steps], columns=["step", "measured_ns", "projected_ns", "delta_pct", "mfu", "projected_mfu"])
    if args.format == "csv":
        write_frame(df, "csv", raw_csv=wants_raw_csv(args))
        return EXIT_OK
    view = pd.DataFrame({"step": df["step"], "measured": [format_ns(v) for v in df["measured_ns"]],
                         "projected": [format_ns(v) for v in df["projected_ns"]],
                         "change": [f"{v:+.1f}%" if v == v else "—" for v in df["delta_pct"]],
                         "MFU": [f"{v * 100:.1f}%" if v is not None and v == v else "—" for v in df["mfu"]],
                         "projected MFU": [f"{v * 100:.1f}%" if v is not None and v == v else "—" for v in df["projected_mfu"]]})
    write_frame(view, "table")
    m, p = proj.median_measured_ns, proj.median_projected_ns
    print(f"median step: measured {format_ns(m)}, projected {format_ns(p)} ({(p - m) / m * 100:+.1f}%) with {changes.label()}"
          if m > 0 else "median step: —")
    for note in proj.notes:
        print(f"  {note['change']}: {note['what']}")
    return EXIT_OK
