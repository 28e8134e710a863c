"""The timeline's row layout, without Qt: which lanes show, in what order, pinned, hidden,
collapsed, filtered, and the rows that result.

:class:`LaneLayout` holds the user's choices and turns the open traces' track trees
(:class:`~kviewer.session.tracks.TraceTracks`) into :class:`Row` s, top to bottom. The timeline
widget only sends its commands (from a click or the row menu) and paints the rows; tests drive it
without a widget. :meth:`LaneLayout.saved` / :meth:`LaneLayout.restore` keep the choices with the
window's layout, by label path (``GPU 0 › stream 7``), so a trace of the same kind opens the way
the user left the last one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Union

from kviewer.session.tracks import CounterTrack, Group, Lane, TraceTracks

#: row heights in device-independent pixels (the timeline paints them)
LANE_H = 18.0
HEADER_H = 20.0
#: air below the pinned rows and below each trace
GAP = 6.0
#: separates the labels of a path in :meth:`LaneLayout.saved`
SEP = " › "

Item = Union[Lane, CounterTrack]
Child = Union[Group, Lane, CounterTrack]


@dataclass
class Row:
    """One horizontal band of the timeline."""

    y: float
    h: float
    kind: str
    """header | lane | counter"""
    depth: int
    label: str
    tracks: TraceTracks
    group: Group | None = None
    lane: Lane | None = None
    counter: CounterTrack | None = None
    parent: Group | None = None
    """the group whose children hold this row's lane, counter or group (None for a trace root)"""


@dataclass
class SavedLayout:
    """The user's choices by label path below a trace's root (plain data: JSON in the settings)."""

    hidden: list[str] = field(default_factory=list)
    pinned: list[str] = field(default_factory=list)
    collapsed: list[str] = field(default_factory=list)
    expanded: list[str] = field(default_factory=list)
    """groups the user opened that start collapsed (a deep CPU thread, the python stack)"""
    order: dict[str, list[str]] = field(default_factory=dict)
    """group path -> its children's labels in the user's order"""
    filter: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"hidden": self.hidden, "pinned": self.pinned, "collapsed": self.collapsed, "expanded": self.expanded,
                "order": self.order, "filter": self.filter}

    @classmethod
    def from_json(cls, data: Any) -> SavedLayout:
        """A saved layout from settings; anything malformed is left out (never an error)."""
        if not isinstance(data, dict):
            return cls()

        def strings(value: Any) -> list[str]:
            return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []

        order = data.get("order")
        text = data.get("filter")
        return cls(
            hidden=strings(data.get("hidden")),
            pinned=strings(data.get("pinned")),
            collapsed=strings(data.get("collapsed")),
            expanded=strings(data.get("expanded")),
            order={k: strings(v) for k, v in order.items() if isinstance(k, str)} if isinstance(order, dict) else {},
            filter=text if isinstance(text, str) else "",
        )


class LaneLayout:
    """Pins, hidden rows, the lane filter and the rows of the open traces.

    Collapsed groups and sibling order live in the track trees themselves
    (:attr:`Group.collapsed`, :attr:`Group.children`); only these commands change them.
    """

    def __init__(self) -> None:
        self.hidden: set[Item] = set()
        """lanes and counter rows the user hid"""
        self.pinned: list[tuple[TraceTracks, Item]] = []
        """rows pinned to the top, above every trace, in pin order"""
        self.filter = ""
        self.rows: list[Row] = []
        self.lane_rows: dict[tuple[int, int], Row] = {}
        """(trace key, lane index) -> the row that draws the lane (a collapsed group's header)"""
        self._saved = SavedLayout()
        self._adopted: set[int] = set()

    # commands ----------------------------------------------------------------------------------
    def set_filter(self, text: str) -> None:
        """Show only the lanes whose label, or a group above them, contains ``text``."""
        self.filter = text.strip()

    def hide(self, item: Item) -> None:
        self.hidden.add(item)
        self.pinned = [(t, i) for t, i in self.pinned if i is not item]

    def unhide_all(self) -> None:
        self.hidden.clear()

    def pin(self, tracks: TraceTracks, item: Item) -> bool:
        """Keep a lane or counter row at the top; False when it already is."""
        if any(i is item for _t, i in self.pinned):
            return False
        self.pinned.append((tracks, item))
        return True

    def unpin(self, item: Item) -> None:
        self.pinned = [(t, i) for t, i in self.pinned if i is not item]

    def move(self, row: Row, step: int) -> bool:
        """Move a lane, counter or group ``step`` places among its siblings (pinned rows: in the
        pinned list); False when nothing moved."""
        item: Any = row.lane or row.counter or row.group
        if row.parent is None:
            order = [i for _t, i in self.pinned]
            if item not in order:
                return False
            j = order.index(item)
            k = min(max(j + step, 0), len(order) - 1)
            self.pinned.insert(k, self.pinned.pop(j))
            return k != j
        sib = row.parent.children
        j = next(i for i, ch in enumerate(sib) if ch is item)
        k = min(max(j + step, 0), len(sib) - 1)
        sib.insert(k, sib.pop(j))
        return k != j

    def toggle(self, group: Group | None) -> None:
        if group is not None:
            group.collapsed = not group.collapsed

    def expand_to(self, tracks: TraceTracks, lane: Lane) -> bool:
        """Open the groups above ``lane`` (to reveal it); True when one was collapsed."""
        changed = False
        for g in tracks.group_path(lane):
            if g.collapsed:
                g.collapsed = False
                changed = True
        return changed

    # rows --------------------------------------------------------------------------------------
    def layout(self, traces: Sequence[TraceTracks]) -> list[Row]:
        """The rows of ``traces`` top to bottom (pinned rows first); kept in :attr:`rows`."""
        for tracks in traces:
            if tracks.key not in self._adopted:
                self._adopted.add(tracks.key)
                self._apply_saved(tracks)
        rows: list[Row] = []
        lane_rows: dict[tuple[int, int], Row] = {}
        y = 0.0
        needle = self.filter.lower()
        pinned_items = {id(item) for _t, item in self.pinned}

        def shown(item: Item, path: str) -> bool:
            if item in self.hidden or id(item) in pinned_items:
                return False
            return not needle or needle in (path + " " + item.label).lower()

        def visit(tracks: TraceTracks, g: Group, depth: int, parent: Group | None, path: str) -> bool:
            """Rows of ``g``; False (and nothing added) when the search leaves none of it."""
            nonlocal y
            first, y_before = len(rows), y
            path = path + " " + g.label
            rows.append(Row(y, HEADER_H, "header", depth, g.label, tracks, group=g, parent=parent))
            header = rows[-1]
            y += HEADER_H
            any_shown = not needle or needle in path.lower()
            if g.collapsed and not needle:
                for lane in g.lanes():
                    lane_rows[(tracks.key, lane.index)] = header
                return True
            for ch in g.children:
                if isinstance(ch, Group):
                    any_shown |= visit(tracks, ch, depth + 1, g, path)
                elif shown(ch, path):
                    any_shown = True
                    if isinstance(ch, CounterTrack):
                        rows.append(Row(y, LANE_H, "counter", depth + 1, ch.label, tracks, counter=ch, parent=g))
                    else:
                        row = Row(y, LANE_H, "lane", depth + 1, ch.label, tracks, lane=ch, parent=g)
                        rows.append(row)
                        lane_rows[(tracks.key, ch.index)] = row
                    y += LANE_H
            if not any_shown:
                del rows[first:]
                y = y_before
            return any_shown

        live = {t.key for t in traces}
        self._adopted &= live
        self.pinned = [(t, item) for t, item in self.pinned if t.key in live]
        if self.pinned:
            rows.append(Row(y, HEADER_H, "header", 0, "Pinned", self.pinned[0][0]))
            y += HEADER_H
            for tracks, item in self.pinned:
                label = f"{tracks.label}{SEP}{item.label}" if len(traces) > 1 else item.label
                if isinstance(item, CounterTrack):
                    rows.append(Row(y, LANE_H, "counter", 1, label, tracks, counter=item))
                else:
                    row = Row(y, LANE_H, "lane", 1, label, tracks, lane=item)
                    rows.append(row)
                    lane_rows[(tracks.key, item.index)] = row
                y += LANE_H
            y += GAP
        for tracks in traces:
            visit(tracks, tracks.root, 0, None, "")
            y += GAP  # a little air between traces
        self.rows = rows
        self.lane_rows = lane_rows
        return rows

    # saved with the window's layout ------------------------------------------------------------
    def saved(self, traces: Iterable[TraceTracks]) -> SavedLayout:
        """The choices made on ``traces``, by label path below each trace's root, merged with
        what was saved before (the last word wins)."""
        out = SavedLayout(list(self._saved.hidden), [], list(self._saved.collapsed), list(self._saved.expanded),
                          dict(self._saved.order), self.filter)
        out.pinned = [_path(t, item) for t, item in self.pinned]
        for tracks in traces:
            for path, node, _parent in _walk(tracks.root):
                if isinstance(node, Group):
                    if node is not tracks.root:
                        _put(out.collapsed, path, node.collapsed and not node.start_collapsed)
                        _put(out.expanded, path, not node.collapsed and node.start_collapsed)
                    if node.initial_order and [c.label for c in node.children] != node.initial_order:
                        out.order[path] = [c.label for c in node.children]
                    elif path in out.order and node.initial_order:
                        del out.order[path]
                else:
                    _put(out.hidden, path, node in self.hidden)
        return out

    def restore(self, saved: SavedLayout) -> None:
        """Apply ``saved`` to traces opened from now on (and the lane filter now)."""
        self._saved = saved
        self.filter = saved.filter
        self._adopted = set()

    def _apply_saved(self, tracks: TraceTracks) -> None:
        s = self._saved
        if not (s.hidden or s.pinned or s.collapsed or s.expanded or s.order):
            return
        hidden, collapsed, expanded = set(s.hidden), set(s.collapsed), set(s.expanded)
        items: dict[str, Item] = {}
        for path, node, _parent in _walk(tracks.root):
            if isinstance(node, Group):
                if path in collapsed:
                    node.collapsed = True
                elif path in expanded:
                    node.collapsed = False
                want = s.order.get(path)
                if want:
                    rank = {label: i for i, label in enumerate(want)}
                    node.children.sort(key=lambda c: rank.get(c.label, len(rank)))
            else:
                items[path] = node
                if path in hidden:
                    self.hidden.add(node)
        for path in s.pinned:
            item = items.get(path)
            if item is not None:
                self.pin(tracks, item)


def _walk(root: Group) -> Iterable[tuple[str, Child, Group | None]]:
    """(path below the root, node, parent) of every group, lane and counter under ``root``."""
    stack: list[tuple[str, Child, Group | None]] = [("", root, None)]
    while stack:
        path, node, parent = stack.pop()
        yield path, node, parent
        if isinstance(node, Group):
            for ch in reversed(node.children):
                stack.append((f"{path}{SEP}{ch.label}" if path else ch.label, ch, node))


def _path(tracks: TraceTracks, item: Item) -> str:
    for path, node, _parent in _walk(tracks.root):
        if node is item:
            return path
    return item.label


def _put(values: list[str], path: str, present: bool) -> None:
    if present and path not in values:
        values.append(path)
    elif not present and path in values:
        values.remove(path)


__all__ = ["HEADER_H", "LANE_H", "LaneLayout", "Row", "SavedLayout"]
