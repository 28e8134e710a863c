"""The analyses of one open trace as the window, the screenshot path and the report keep them (no Qt).

The speed of light of a trace is computed once (on its recognised GPU, or on the one the user
chose) and kept with its tracks as a :class:`SolInfo`: the timeline colours kernels by its
``bound`` and draws its ``t_sol_ns`` inside each bar, the kernel table and the details show its
columns, the roofline and fusion docks reuse it. The trace itself is never changed: the SOL table
(:data:`kviewer.core.schema.SOL`) lives beside the kernels, row for row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kviewer import analysis
from kviewer.core import Diagnostic
from kviewer.errors import AnalysisError

if TYPE_CHECKING:
    import pandas as pd

    import kviewer.analysis.fusion
    import kviewer.analysis.sol
    from kviewer.analysis.devices import DeviceSpec
    from kviewer.analysis.fusion import FusionResult
    from kviewer.analysis.sol import SolResult
    from kviewer.core import Trace

#: the load-time warning that says why kernels are not coloured (dropped once a GPU is chosen)
UNCOLOURED_WARNING = "kernels not coloured by bound"


@dataclass(frozen=True)
class SolInfo:
    """The speed of light of a trace, or why there is none."""

    result: SolResult | None
    """None when the speed of light is unknown (see ``why``)"""
    why: str = ""
    """why there is no result ("" when there is one)"""
    device: str | None = None
    """the device id the user chose, None when the trace's own device was recognised"""
    no_kernels: bool = False
    """the trace has no kernels (nothing to compute; not a problem to report)"""
    problem: str = ""
    """``why`` without the file name (the window shows it) and the command line's advice (the
    docks offer a device picker instead)"""

    @property
    def ok(self) -> bool:
        return self.result is not None

    @property
    def sol(self) -> pd.DataFrame | None:
        """The SOL table (one row per kernel), None when unknown."""
        return self.result.table if self.result is not None else None

    @property
    def spec(self) -> DeviceSpec | None:
        """The GPU that ran most of the kernel time."""
        return self.result.spec if self.result is not None else None


def compute_sol(trace: Trace, device: str | None = None) -> SolInfo:
    """The speed of light of ``trace`` on its recognised GPU (or on ``device``); never raises for
    an analysis problem, which is returned as ``why`` instead."""
    if not len(trace.kernels):
        error = AnalysisError("the trace has no kernels", path=trace.meta.path)
        return SolInfo(None, str(error), device, no_kernels=True, problem=error.problem)
    try:
        return SolInfo(analysis.sol.sol_result(trace, device), "", device)
    except AnalysisError as exc:
        return SolInfo(None, str(exc), device, problem=exc.problem)
    except Exception as exc:  # noqa: BLE001  # an analysis bug must not take the window down
        text = f"speed of light not available: {type(exc).__name__}: {exc}"
        return SolInfo(None, text, device, problem=text)


def sol_for_load(trace: Trace) -> SolInfo | None:
    """The speed of light a freshly loaded trace opens with (None for a trace without kernels).

    When it cannot be computed the trace's warnings say why its kernels are not coloured."""
    if not len(trace.kernels):
        return None
    info = compute_sol(trace)
    note_uncoloured(trace, info)
    return info


def note_uncoloured(trace: Trace, info: SolInfo | None) -> None:
    """When the speed of light could not be computed, the trace's warnings say why its kernels
    are not coloured (on the thread that owns the trace: the GUI thread in the window)."""
    if info is not None and not info.ok and not info.no_kernels:
        # the problem without the file name (the status bar shows it) or the CLI's advice
        trace.meta.warnings.append(Diagnostic.warning("unknown_device", trace.meta.path, f"{UNCOLOURED_WARNING}: {info.problem}"))


def drop_uncoloured_warning(trace: Trace) -> None:
    """The kernels are coloured now (a GPU was chosen): the load's warning no longer holds."""
    warnings = trace.meta.warnings
    warnings[:] = [w for w in warnings if w.kind != "unknown_device"]


def fusion_for(trace: Trace, info: SolInfo) -> FusionResult:
    """Fusion candidates of ``trace`` from its known speed of light."""
    assert info.result is not None
    return analysis.fusion.fusion(trace, sol=info.result)
