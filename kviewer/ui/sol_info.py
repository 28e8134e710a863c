"""The speed-of-light result of one open trace, kept with its tracks (no Qt).

The loading thread computes it once per trace (it colours the kernels by bound); the roofline and
fusion docks reuse it rather than computing it again. When the GPU is not recognised the docks
offer a device picker: :func:`compute_sol` with that device gives a new :class:`SolInfo` and a
trace whose kernels carry ``bound`` and ``t_sol_ns`` (:func:`kviewer.ui.headless.with_sol`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

    from kviewer.analysis.devices import DeviceSpec
    from kviewer.core import Trace

#: the load-time warning that says why kernels are not coloured (dropped once a GPU is chosen)
UNCOLOURED_WARNING = "kernels not coloured by bound"


@dataclass(frozen=True)
class SolInfo:
    """SOL frame and GPU of a trace, or why there is none."""

    sol: pd.DataFrame | None
    """one row per kernel (:func:`kviewer.analysis.sol.speed_of_light`), None when unknown"""
    spec: DeviceSpec | None
    """the GPU that ran most of the kernel time"""
    why: str = ""
    """why there is no SOL frame ("" when there is one): the whole line, as the CLI says it"""
    device: str | None = None
    """the device id the user chose, None when the trace's own device was recognised"""
    problem: str = ""
    """``why`` without the file name (the window shows it) and the command line's advice (the
    docks offer a device picker instead)"""

    @property
    def ok(self) -> bool:
        return self.sol is not None


def compute_sol(trace: Trace, device: str | None = None) -> SolInfo:
    """The speed of light of ``trace`` on its recognised GPU (or on ``device``); never raises for
    an analysis problem, which is returned as ``why`` instead."""
    from kviewer.ui.headless import sol_or_error

    try:
        sol, spec, error = sol_or_error(trace, device)
        why, problem = ("", "") if error is None else (str(error), error.problem)
    except Exception as exc:  # noqa: BLE001  # an analysis bug must not take the window down
        sol, spec = None, None
        why = problem = f"speed of light not available: {type(exc).__name__}: {exc}"
    if sol is not None:
        why = problem = ""
    return SolInfo(sol, spec, why, problem=problem, device=device)


def coloured(trace: Trace, info: SolInfo) -> Trace:
    """The trace with ``bound`` and ``t_sol_ns`` on its kernels (unchanged without SOL)."""
    from kviewer.ui.headless import with_sol

    return with_sol(trace, info.sol)
