"""Make the README pictures from the real window (run under Xvfb, see the README):

    xvfb-run -a -s "-screen 0 1600x1000x24" python docs/make_screenshots.py

docs/screenshot.png: the eager sample as it opens. docs/timeline_nsys_range.png: the bundled nsys
sample zoomed onto a host-to-device copy on stream 13 running under kernels on stream 7, with that
stretch selected and the Range dock open.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def shoot(files: list[Path], out: Path, prepare=None, size=(1600, 1000)) -> None:  # type: ignore[no-untyped-def]
    from PySide6.QtCore import QTimer

    from kviewer.ui.app import create_app
    from kviewer.ui.mainwindow import MainWindow

    app = create_app()
    # a fresh settings folder: the picture shows the default layout, not the last session's
    import tempfile

    from PySide6.QtCore import QSettings

    QSettings.setDefaultFormat(QSettings.Format.IniFormat)
    QSettings.setPath(QSettings.Format.IniFormat, QSettings.Scope.UserScope, tempfile.mkdtemp(prefix="kviewer-shot-"))
    w = MainWindow()
    w.resize(*size)
    w.show()

    def save() -> None:
        if w.runner.pending() or w.loader.busy:
            QTimer.singleShot(150, save)
            return
        app.processEvents()
        w.grab().save(str(out))
        print("wrote", out, w.grab().size())
        w.close()
        app.quit()

    def loaded() -> None:
        if prepare is not None:
            prepare(w)
        QTimer.singleShot(600, save)

    w.loader.idle.connect(loaded)
    QTimer.singleShot(0, lambda: w.open_files([str(f) for f in files]))
    app.exec()


def nsys_range(w) -> None:  # type: ignore[no-untyped-def]
    import numpy as np

    tracks = w.state.current
    g = tracks.trace.gpu_ops
    k = tracks.trace.kernels
    side = g[(g["stream"] == 13)]
    # a side-stream copy that runs while kernels run on stream 7
    ks, ke = k["start"].to_numpy(), k["end"].to_numpy()
    for s, e in zip(side["start"].to_numpy(), side["end"].to_numpy()):
        if ((ks < e) & (ke > s)).sum() >= 3:
            break
    t0 = float(s - tracks.offset_ns)
    t1 = float(e - tracks.offset_ns)
    pad = (t1 - t0) * 1.5
    w.timeline.set_range(t0 - pad, t1 + pad)
    w.state.set_time_selection((t0 - pad * 0.3, t1 + pad * 0.3))
    w.range_dock.show()
    w.range_dock.raise_()
    w.range_panel.tabs.setCurrentIndex(0)


if __name__ == "__main__":
    which = sys.argv[1] if len(sys.argv) > 1 else "both"
    if which in ("both", "readme"):
        shoot([REPO / "sample_traces" / "h200_llm_block_eager.pt.trace.json.gz"], REPO / "docs" / "screenshot.png")
    if which in ("both", "nsys"):
        path = REPO.parent / "shared" / "samples" / "nsys" / "h200_llm_train_nvtx.sqlite"
        if not path.is_file():
            path = REPO / "sample_traces" / "h200_llm_train_nvtx.sqlite.gz"
        shoot([path], REPO / "docs" / "timeline_nsys_range.png", nsys_range)
