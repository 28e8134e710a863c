"""MFU per step of the open traces, for the Details and Range docks and the step markers' tooltips:
computed off the GUI thread (:func:`kviewer.session.mfu_view.compute_mfu`) once per trace and
speed of light, and kept in the trace's :data:`~kviewer.session.open_trace.MFU` slot (dropped with
the speed of light it was computed from; a failure is kept, not asked again)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from kviewer import analysis
from kviewer.session.mfu_view import compute_mfu
from kviewer.session.open_trace import MFU, Failed
from kviewer.ui.analysis_requests import AnalysisRequests, same_sol

if TYPE_CHECKING:
    import kviewer.analysis.mfu


def _job(tracks: Any) -> Callable[[], Any]:
    trace, info = tracks.trace, tracks.sol_info
    return lambda: compute_mfu(trace, info)


class MfuRequests(AnalysisRequests):
    def __init__(self, runner: Any, state: Any) -> None:
        super().__init__(runner, state, MFU, _job, same_sol)

    def get(self, tracks: Any, then: Callable[[], None]) -> Any:
        """The trace's :class:`~kviewer.analysis.mfu.MfuResult`, or None while it is computed;
        ``then()`` is called on the GUI thread when it is ready. A failed computation is a result
        whose totals say the error (shown as "MFU unknown: ...")."""
        got = self.request(tracks, then)
        if isinstance(got, Failed):
            return analysis.mfu.unknown_mfu(got.problem)
        return got.result if got is not None else None

    def warm(self, state: Any) -> None:
        """Compute the MFU of every open trace once its speed of light is known, so that the
        timeline's tooltips of step markers can show it (``state.tracesChanged``)."""
        for tracks in state.traces:
            if tracks.sol_info is not None and state.document.analysis(tracks.key, MFU) is None:
                self.request(tracks, lambda: None)
