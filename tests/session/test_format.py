"""One formatting module (session/format.py) for the window, the CLI, the report and the fleet
report: the same number reads the same everywhere, and unknown is written one way per
destination ("—" for people, an empty CSV cell, JSON null), never 0."""

from __future__ import annotations

import io
import json
import math

import numpy as np
import pandas as pd
import pytest

from kviewer import report
from kviewer.cli.common import format_ns, human_table, write_frame
from kviewer.fleet import write as fleet_write
from kviewer.session import format as fmt


def test_the_report_and_the_fleet_report_use_the_one_formatter() -> None:
    assert report.fmt_ns is fmt.format_duration and report.fmt_count is fmt.format_count
    assert report.fmt_signed_ns is fmt.format_signed_duration and report.fmt_int is fmt.format_count_int
    assert fleet_write.format_duration is fmt.format_duration


@pytest.mark.parametrize(("value", "text"), [(2.5, "2.50"), (2.0, "2"), (999.0, "999"), (1500.0, "1.50 k"), (1.2e12, "1.20 T"), (-2.5e9, "-2.50 G")])
def test_a_count_reads_the_same_in_the_window_and_the_report(value: float, text: str) -> None:
    assert fmt.format_count(value) == report.fmt_count(value) == fmt.format_value("si", value) == text


def test_durations_and_percentages() -> None:
    assert fmt.format_duration(1234) == report.fmt_ns(1234) == format_ns(1234) == "1.234 µs"
    assert fmt.format_duration(999) == "999 ns" and fmt.format_duration(2.5e9) == "2.500 s"
    assert fmt.format_signed_duration(1500) == "+1.500 µs" and fmt.format_signed_duration(-1500) == "-1.500 µs"
    assert report.fmt_pct(12.345) == "12.3%" and report.fmt_pct(12.345, signed=True) == "+12.3%"
    assert fmt.format_pct(12.345) == "12.3" and fmt.format_int(7.0) == "7" and fmt.format_count_int(12345) == "12,345"


@pytest.mark.parametrize("unknown", [None, math.nan, math.inf, -math.inf])
def test_unknown_is_a_dash_for_people_everywhere(unknown: float | None) -> None:
    people = {
        "window duration": fmt.format_duration(unknown), "window count": fmt.format_count(unknown),
        "window pct": fmt.format_pct(unknown), "window int": fmt.format_int(unknown),
        "window bytes": fmt.format_bytes(unknown), "window signed": fmt.format_signed_duration(unknown),
        "report ns": report.fmt_ns(unknown), "report int": report.fmt_int(unknown),  # type: ignore[arg-type]
        "report count": report.fmt_count(unknown), "report pct": report.fmt_pct(unknown),  # type: ignore[arg-type]
        "fleet ns": fleet_write._ns(unknown), "fleet int": fleet_write._int(unknown), "cli": format_ns(unknown),  # type: ignore[arg-type]
    }  # fmt: skip
    assert set(people.values()) == {"—"}, people


def test_unknown_in_cli_tables_csv_and_json() -> None:
    df = pd.DataFrame({"name": ["a", "b"], "value": [1.5, np.nan]})
    assert human_table(df).splitlines()[-1].split() == ["b", fmt.UNKNOWN]
    out = io.StringIO()
    write_frame(df, "csv", out)
    assert out.getvalue().splitlines()[-1] == "b," + fmt.UNKNOWN_CSV
    out = io.StringIO()
    write_frame(df, "json", out)
    assert json.loads(out.getvalue())[1]["value"] is None
