"""Compare mode's commands (no Qt): B aligned on A on the shared time axis, labelled A and B.

:func:`start_compare` takes a finished :class:`~kviewer.analysis.compare.CompareResult` (computed on
a worker by the window, or synchronously by the headless screenshot) and places B so that both
start their first step (or first kernel) at the same x: ``time_in_A = time_in_B +
align_offset_ns``. :func:`stop_compare` puts both back on their own times. These, with the
:class:`~kviewer.session.document.Document`'s own commands, are the only code that moves or
relabels an open trace; the window's Compare dock follows the document's ``compare_changed``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kviewer import analysis
from kviewer.session.document import ComparePair

if TYPE_CHECKING:
    import kviewer.analysis.compare
    from kviewer.analysis.compare import CompareResult
    from kviewer.session.document import Document


def start_compare(document: Document, a_key: int, b_key: int, result: CompareResult) -> bool:
    """Compare open trace ``b_key`` (B) with ``a_key`` (A); False when either is not open.

    A comparison already on ends first."""
    a, b = document.get(a_key), document.get(b_key)
    if a is None or b is None or a_key == b_key:
        return False
    if document.compare is not None:
        document.end_compare(notify=False)
    a._place(a.own_offset_ns, "A")
    # B drawn at (t_B + align - A's offset): its times on display are on A's clock
    b._place(a.own_offset_ns - int(result.align_offset_ns), "B", f"on A's clock, {a.trace.meta.clock}")
    document.compare = ComparePair(a_key, b_key, result)
    document.traces_changed.emit()  # B's times moved: every view redraws
    document.compare_changed.emit()
    return True


def stop_compare(document: Document) -> None:
    """Leave compare mode: both traces back on their own times and labels."""
    document.end_compare()


def compare_open(document: Document) -> CompareResult | None:
    """Compare the two open traces (the first opened is A) synchronously and show the
    comparison; None when not exactly two are open. The headless path's way to what the
    window does in the background."""
    if len(document.traces) != 2:
        return None
    a, b = document.traces
    result = analysis.compare.compare(a.trace, b.trace)
    start_compare(document, a.key, b.key, result)
    return result


__all__ = ["compare_open", "start_compare", "stop_compare"]
