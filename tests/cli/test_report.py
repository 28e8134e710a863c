"""``kviewer report``: what a review document holds, trace text escaped in HTML and Markdown,
pictures embedded (HTML) or written beside (Markdown), and the HTML opened by a real browser."""

from __future__ import annotations

import base64
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from kviewer.cli import EXIT_OK, EXIT_USER_ERROR, main
from kviewer.core import Trace, TraceMeta, make_table
from kviewer.report import (
    Paragraph,
    build_report,
    fmt_ns,
    md_escape,
    render_html,
    render_markdown,
    write_report,
)

EAGER = "h200_llm_block_eager.pt.trace.json.gz"
COMPILED = "h200_llm_block_compiled.pt.trace.json.gz"
SCRIPT = "<script>alert(1)</script>"
#: names that break naive HTML or Markdown: markup, entities, table pipes, code spans, emphasis, links
HOSTILE = [
    SCRIPT,
    "void gemm<float, 128>(float*, int) & co",
    "a|b`c`*d*_e_[f](g) ~~h~~ \\ #i",
    '<img src=x onerror="alert(2)">',
]
REPO = Path(__file__).resolve().parents[2]


def hostile_trace() -> Trace:
    n = 40
    names = np.array(HOSTILE * (n // len(HOSTILE)), dtype=object)
    kernels = make_table(
        "kernels",
        n,
        {
            "name": names,
            "short_name": names,
            "start": np.arange(n) * 10_000,
            "dur": np.full(n, 5_000) + np.arange(n),
            "device": np.zeros(n),
            "stream": np.full(n, 7),
            "grid_x": np.full(n, 128), "grid_y": np.ones(n), "grid_z": np.ones(n),
            "block_x": np.full(n, 256), "block_y": np.ones(n), "block_z": np.ones(n),
        },
    )
    devices = make_table("devices", 1, {"id": [0], "name": ["NVIDIA H200"], "vendor": ["NVIDIA"]})
    meta = TraceMeta("/tmp/<evil>&dir/trace.json", "synthetic", "synthetic <b>bold</b> format", tool="tool <i>", extra={"note": SCRIPT})
    return Trace(meta, kernels=kernels, devices=devices)


class TextAndTags(HTMLParser):
    """Element names, text nodes, and the cells of each table row of an HTML document."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: Counter[str] = Counter()
        self.text: list[str] = []
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None
        self.attrs: list[tuple[str, str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[tag] += 1
        self.attrs += [(tag, k, v) for k, v in attrs]
        if tag == "tr":
            self.rows.append([])
        if tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)


def parse(html_text: str) -> TextAndTags:
    p = TextAndTags()
    p.feed(html_text)
    p.close()
    return p


# ---------------------------------------------------------------------------------------------
# escaping, without a browser


def test_html_escapes_every_piece_of_trace_text() -> None:
    report = build_report([hostile_trace()], pictures=False, show_paths=True)  # the path's markup too
    doc = render_html(report, {})
    assert "<script" not in doc.lower()
    assert "<img" not in doc and "<b>" not in doc and "<i>" not in doc
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in doc
    p = parse(doc)
    assert p.tags["script"] == 0 and p.tags["img"] == 0 and p.tags["b"] == 0
    text = "".join(p.text)
    for name in HOSTILE:
        assert name in text  # shown as text, exactly
    assert "/tmp/<evil>&dir/trace.json" in text and "synthetic <b>bold</b> format" in text
    # the kernel names land in table cells, one per cell
    cells = [c for row in p.rows for c in row]
    assert SCRIPT in cells and HOSTILE[2] in cells
    # no attribute carries an event handler
    assert not [a for a in p.attrs if a[1].startswith("on")]
    # and a policy that forbids scripts anyway
    assert "default-src 'none'" in doc


def test_markdown_escapes_markup_pipes_and_code() -> None:
    assert md_escape(SCRIPT) == "&lt;script&gt;alert(1)&lt;/script&gt;"
    assert md_escape("a|b`c`") == "a\\|b\\`c\\`"
    report = build_report([hostile_trace()], pictures=False)
    doc = render_markdown(report, {})
    assert "<script" not in doc and "<img" not in doc
    markdown_it = pytest.importorskip("markdown_it")
    # render as GitHub does (tables on, raw HTML allowed): nothing of the names becomes markup
    rendered = markdown_it.MarkdownIt("commonmark", {"html": True}).enable("table").enable("strikethrough").render(doc)
    p = parse(rendered)
    assert p.tags["script"] == 0 and p.tags["img"] == 0 and p.tags["code"] == 0
    assert p.tags["a"] == 0 and p.tags["s"] == 0 and p.tags["del"] == 0
    # table cells and fact lines (where trace text goes) are plain text: no element inside
    inner = re.findall(r"<td[^>]*>(.*?)</td>", rendered, re.DOTALL) + re.findall(r"<li>(.*?)</li>", rendered, re.DOTALL)
    assert len(inner) > 40
    assert not [x for x in inner if "<" in x]
    assert "note: &lt;script&gt;alert(1)&lt;/script&gt;" in rendered
    cells = [c for row in p.rows for c in row]
    for name in HOSTILE:
        assert name in cells, name
    # a | inside a name did not split its cell: every row of a table has the header's cell count
    for table in re.findall(r"<table>.*?</table>", rendered, re.DOTALL):
        rows = parse(table).rows
        assert len({len(r) for r in rows}) == 1


# ---------------------------------------------------------------------------------------------
# content, against the file's own numbers


def _file_kernels(path: Path) -> list[dict]:
    with gzip.open(path, "rt") as fh:
        return [e for e in json.load(fh)["traceEvents"] if e.get("cat") == "kernel"]


def test_report_of_one_trace_holds_facts_top_kernels_sol_and_fusion(sample_traces: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    report = build_report([_load(sample_traces / EAGER)], pictures=False)
    write_report(report, out, {})
    p = parse(out.read_text(encoding="utf-8"))
    headings = [s.title for s in report.sections]
    assert headings == ["Traces", "Top kernels", "Speed of light", "Fusion candidates", "What would help most"]
    text = "\n".join(p.text)
    assert "PyTorch Profiler schema 1, CUDA runtime 13.0" in text  # tool and versions
    assert "NVIDIA H200" in text and "sm_90" in text  # device
    assert "NVIDIA H200 SXM 141GB" in text  # the peak rates used
    # the top kernel and its count, as the file has them
    events = _file_kernels(sample_traces / EAGER)
    by_total = Counter()
    for e in events:
        by_total[e["name"]] += e["dur"]
    top_name = by_total.most_common(1)[0][0]
    top_row = next(r for r in p.rows if len(r) == 8 and r[0] == "1")
    assert top_row[1] == top_name
    assert top_row[2] == f"{sum(1 for e in events if e['name'] == top_name):,}"
    assert f"{len(events):,}, " in text
    assert "memory-bound kernels" in text and "candidates; estimated saving" in text


def test_report_of_two_traces_adds_the_comparison(sample_traces: Path, tmp_path: Path) -> None:
    a, b = _load(sample_traces / EAGER), _load(sample_traces / COMPILED)
    report = build_report([a, b], pictures=False)
    titles = [s.title for s in report.sections]
    assert titles[0] == "Traces" and titles[-1] == "Comparison: B against A"
    assert sum(t.startswith("Speed of light of A") for t in titles) == 1 and sum(t.startswith("Speed of light of B") for t in titles) == 1
    doc = render_html(report, {})
    total_a = sum(e["dur"] for e in _file_kernels(sample_traces / EAGER)) * 1000
    total_b = sum(e["dur"] for e in _file_kernels(sample_traces / COMPILED)) * 1000
    text = "".join(parse(doc).text)
    # the totals line says what the files say (µs floats rounded to ns per kernel: within 1 µs)
    m = re.search(r"Total kernel time: A ([\d.]+) ms, B ([\d.]+) ms", text)
    assert m is not None
    assert abs(float(m.group(1)) * 1e6 - total_a) < 1000 and abs(float(m.group(2)) * 1e6 - total_b) < 1000
    assert "faster" in text and "replaced" in text and "triton_" in text


@pytest.mark.parametrize(
    ("rel", "sol_problem"),
    [
        ("nsys/perlmutter-cloverleaf-cuda.sqlite", ""),
        ("ncu/CuVectorAddDrv.ncu-rep", ""),
        ("torch/tracelens_mi300/gaunernst_bert-small-uncased__1016001.json.gz", ""),
        ("rocprof/rocprofv3_2025/ps_file_kernel_trace.csv", "is not in the device table"),
        ("torch/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz", "the trace has no kernels"),
    ],
)
def test_report_of_other_tools_and_what_it_cannot_say(samples: Path, rel: str, sol_problem: str) -> None:
    trace = _load(samples / rel)
    report = build_report([trace], pictures=False)
    sol = next(s for s in report.sections if s.title == "Speed of light")
    first = sol.blocks[0]
    if sol_problem:
        assert isinstance(first, Paragraph) and first.text.startswith("No speed-of-light analysis") and sol_problem in first.text
    else:
        assert not isinstance(first, Paragraph)
    doc = render_html(report, {})
    text = "".join(parse(doc).text)
    assert f"{len(trace.kernels):,}" in text
    assert trace.meta.format_label in text
    render_markdown(report, {})


def _load(path: Path) -> Trace:
    from kviewer.io import load

    return load(path)


# ---------------------------------------------------------------------------------------------
# the command


def _run_cli(*argv: str) -> subprocess.CompletedProcess[str]:
    """The CLI in a fresh process with no display, as a user on a server runs it."""
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    env["KVIEWER_NO_CACHE"] = "1"
    return subprocess.run([sys.executable, "-m", "kviewer", *argv], capture_output=True, text=True, env=env, timeout=300, cwd=REPO, check=False)


def test_cli_html_embeds_the_pictures(sample_traces: Path, tmp_path: Path) -> None:
    out = tmp_path / "review.html"
    r = _run_cli("report", str(sample_traces / EAGER), str(sample_traces / COMPILED), "-o", str(out), "-q")
    assert r.returncode == EXIT_OK, r.stderr
    assert r.stdout.strip() == str(out)
    assert list(tmp_path.iterdir()) == [out]  # self-contained: nothing beside it
    doc = out.read_text(encoding="utf-8")
    p = parse(doc)
    srcs = [v for tag, k, v in p.attrs if tag == "img" and k == "src"]
    assert len(srcs) == 3  # the timeline of both, a roofline each
    for src in srcs:
        assert src is not None and src.startswith("data:image/png;base64,")
        png = base64.b64decode(src.split(",", 1)[1])
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
        width = int.from_bytes(png[16:20], "big")
        assert width >= 2000  # drawn at 2x
    assert not re.search(r"""(src|href)=["']?(https?:|//|file:)""", doc)  # nothing fetched from outside


def test_cli_markdown_writes_pictures_beside(sample_traces: Path, tmp_path: Path) -> None:
    out = tmp_path / "my review.md"
    r = _run_cli("report", str(sample_traces / EAGER), "-o", str(out), "-q", "--top", "5")
    assert r.returncode == EXIT_OK, r.stderr
    folder = tmp_path / "my review_files"
    assert sorted(p.name for p in folder.iterdir()) == ["roofline_trace.png", "timeline.png"]
    doc = out.read_text(encoding="utf-8")
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", doc)
    assert links == ["my%20review_files/timeline.png", "my%20review_files/roofline_trace.png"]
    assert r.stdout.split("\n")[:3] == [str(out), str(folder / "timeline.png"), str(folder / "roofline_trace.png")]
    # --top 5: five rows in the top kernels table (header, rule, 5 rows)
    top = doc.split("## Top kernels", 1)[1].split("\n\n")[1].splitlines()
    assert len(top) == 7


def test_cli_errors_are_one_line(sample_traces: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    eager = str(sample_traces / EAGER)
    cases = [
        (["report", eager, "-o", str(tmp_path / "r.pdf")], ".html or .md"),
        (["report", eager, eager, eager, "-o", str(tmp_path / "r.html")], "one file, or two"),
        (["report", eager, "-o", str(tmp_path / "no" / "r.html")], "does not exist"),
        (["report", str(tmp_path / "missing.json"), "-o", str(tmp_path / "r.html")], "missing.json"),
        (["report", eager, "-o", str(tmp_path / "r.html"), "--top", "0"], "--top"),
    ]
    for argv, needle in cases:
        assert main(argv) == EXIT_USER_ERROR
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and needle in err, err
    assert not list(tmp_path.iterdir())


def test_cli_without_pictures_needs_no_qt(sample_traces: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.md"
    assert main(["report", str(sample_traces / EAGER), "-o", str(out), "-q", "--no-pictures"]) == EXIT_OK
    assert "![" not in out.read_text(encoding="utf-8") and not (tmp_path / "r_files").exists()
    assert fmt_ns(1_234_567) == "1.235 ms"


# ---------------------------------------------------------------------------------------------
# a real browser

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
]


def _chromium(*args: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run([CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args], capture_output=True, text=True, timeout=180, check=False)


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_chromium_shows_the_hostile_name_as_text(tmp_path: Path) -> None:
    out = tmp_path / "hostile.html"
    write_report(build_report([hostile_trace()], pictures=False), out, {})
    r = _chromium("--dump-dom", out.as_uri())
    assert r.returncode == 0, r.stderr[-2000:]
    dom = r.stdout
    assert "<body>" in dom or "<body" in dom
    assert "<script" not in dom.lower() and "<img" not in dom.lower()
    # the browser kept the name as a text node of a table cell
    p = parse(dom)
    assert p.tags["script"] == 0
    assert SCRIPT in [c for row in p.rows for c in row]


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_chromium_screenshot_shows_tables_and_pictures(sample_traces: Path, tmp_path: Path) -> None:
    QImage = pytest.importorskip("PySide6.QtGui").QImage
    out = tmp_path / "review.html"
    r = _run_cli("report", str(sample_traces / EAGER), str(sample_traces / COMPILED), "-o", str(out), "-q")
    assert r.returncode == EXIT_OK, r.stderr
    shot = tmp_path / "shot.png"
    c = _chromium(f"--screenshot={shot}", "--window-size=1400,2000", "--hide-scrollbars", out.as_uri())
    assert c.returncode == 0 and shot.exists(), c.stderr[-2000:]
    img = QImage(str(shot))
    assert (img.width(), img.height()) == (1400, 2000)
    # the timeline picture is drawn: the kernel bars' colour families are on the page
    from kviewer.session import colors

    pal = colors.palette_rgb()
    memory = [pal[colors.FAMILY_INDEX["kernel_memory"] * colors.SHADES + s] for s in range(colors.SHADES)]
    compute = [pal[colors.FAMILY_INDEX["kernel_compute"] * colors.SHADES + s] for s in range(colors.SHADES)]
    seen = Counter()
    for y in range(0, img.height(), 2):
        for x in range(0, img.width(), 2):
            c_ = img.pixelColor(x, y)
            seen[(c_.red(), c_.green(), c_.blue())] += 1
    # the browser scales the 2x picture to its 1x width, which blends neighbouring colours: near enough
    def near(rgbs: list[tuple[int, int, int]]) -> int:
        return sum(n for col, n in seen.items() if any(max(abs(a - b) for a, b in zip(col, rgb)) <= 6 for rgb in rgbs))

    assert near(memory) > 50 and near(compute) > 50
    # and the table borders and header background of the facts/top tables
    assert seen[(0xEE, 0xF1, 0xF4)] > 200


def test_a_shared_report_names_files_not_local_paths(sample_traces: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 27: a report is shared; an absolute path tells every reader the author's folders and
    user name. Two files of the same name in two private folders, and a warning quoting one path."""
    from kviewer.core import Diagnostic

    folders = [tmp_path / "alice-private" / "run a", tmp_path / "alice-private" / "run b"]
    paths = []
    for folder in folders:
        folder.mkdir(parents=True)
        paths.append(folder / EAGER)
        shutil.copy(sample_traces / EAGER, paths[-1])
    a, b = (_load(p) for p in paths)
    a.meta.warnings.append(Diagnostic.warning("truncated", paths[0], f"{paths[0]}: cut after 10 events"))
    report = build_report([a, b], pictures=False)
    for doc, name in ((render_html(report, {}), EAGER), (render_markdown(report, {}), md_escape(EAGER))):
        assert "alice-private" not in doc and str(tmp_path) not in doc
        assert "run a" not in doc and "compile_pair" not in doc  # nor the folder the profiler wrote to (traceName)
        assert name in doc and "cut after 10 events" in doc
    assert report.title == f"kviewer report: A: {EAGER} vs B: {EAGER}"
    facts = next(s for s in report.sections if s.title == "Traces")
    heads = [b.text for b in facts.blocks if isinstance(b, Paragraph) and b.text.endswith(EAGER)]
    assert heads == [f"A: {EAGER}", f"B: {EAGER}"]  # not "A: A: ..."
    # who wants them gets them
    shown = render_html(build_report([a, b], pictures=False, show_paths=True), {})
    assert str(paths[0]) in shown and str(paths[1]) in shown
    out = tmp_path / "r.html"
    assert main(["report", str(paths[0]), "-o", str(out), "-q", "--no-pictures", "--show-paths"]) == EXIT_OK
    assert str(paths[0]) in out.read_text(encoding="utf-8")
    assert main(["report", str(paths[0]), "-o", str(out), "-q", "--no-pictures"]) == EXIT_OK
    assert "alice-private" not in out.read_text(encoding="utf-8")


def test_report_of_two_traces_says_the_comparisons_notes(sample_traces: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One rank against a folder of two: the report's comparison says that every figure adds a
    side's ranks, as `kviewer compare` and the window do."""
    from kviewer.analysis.compare import compare
    from kviewer.io import load, ranks
    from tests.analysis.test_step_joins import CNN, _two_ranks

    monkeypatch.setenv(ranks.ENV_WORKERS, "1")
    a = load(sample_traces / CNN, use_cache=False)
    b = load(_two_ranks(sample_traces, tmp_path, 1_000_000), use_cache=False)
    notes = compare(a, b).notes
    assert notes
    text = "".join(parse(render_html(build_report([a, b], pictures=False), {})).text)
    assert all(f"Note: {n}." in text for n in notes)
