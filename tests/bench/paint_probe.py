"""Child of ``bench_paint_first.py``: ``kviewer FILE`` as the desktop app starts it
(:func:`kviewer.cli.main`, then :func:`kviewer.ui.app.run`), with a probe that grabs the
timeline every ``--every`` seconds::

    python tests/bench/paint_probe.py TRACE [EVERY_S [FIRST_PAINT.png]]

Prints one JSON line: the epoch time of the first grab whose timeline shows bars (``paint``), of
the first grab of the whole window, once the load and the analyses are done, that the next grab
equals (``complete``: the window was seen in its final state then; ``confirmed``: the next grab,
``EVERY_S`` later, that showed it had not changed), the process's CPU time (all threads) at
``paint`` and ``complete`` (``cpu_paint``, ``cpu_complete``), and how many grabs were taken.
The probe's timer runs on the GUI thread: while that thread is busy no grab is taken, as no
frame would be painted on a real screen.
"""

from __future__ import annotations

import json
import sys
import time


def main() -> int:
    path, every = sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 0.2
    # only what `kviewer FILE` itself imports before it starts the load: the probe's numpy and Qt
    # imports wait for create_app, which the app calls once the load is on its way
    from kviewer import cli
    from kviewer.ui import app as app_module

    seen: dict[str, float] = {}
    state: dict[str, object] = {"grabs": 0, "last": None}
    real_create = app_module.create_app

    def create_app() -> object:
        app = real_create()
        import numpy as np
        from PySide6.QtCore import QTimer
        from PySide6.QtGui import QImage
        from PySide6.QtWidgets import QApplication

        def pixels(img: QImage) -> np.ndarray:
            img = img.convertToFormat(QImage.Format.Format_RGB32)
            buf = np.array(img.constBits(), dtype=np.uint8, copy=True)  # a copy: the image dies here
            h, w = img.height(), img.width()
            return buf[: h * img.bytesPerLine()].reshape(h, img.bytesPerLine())[:, : w * 4].reshape(h, w, 4)[..., :3]

        def probe() -> None:
            windows = [w for w in QApplication.topLevelWidgets() if type(w).__name__ == "MainWindow" and w.isVisible()]
            if not windows:
                return
            w = windows[0]
            now = time.time()
            state["grabs"] = int(state["grabs"]) + 1  # type: ignore[call-overload]
            if "paint" not in seen:
                # every other pixel of every other row: the probe's own work delays the GUI
                # thread it measures (the whole image in int16 took ~0.1 s a grab)
                px = pixels(w.timeline.grab().toImage())[::2, ::2]
                # bars are coloured; the empty timeline is grey (axes, labels, background)
                saturated = int(((px.max(axis=2) - px.min(axis=2)) > 60).sum())  # max >= min: no uint8 wrap
                if saturated > 500:
                    seen["paint"] = now
                    seen["cpu_paint"] = time.process_time()
                    if len(sys.argv) > 3:  # where to save the window as it was first seen painted
                        w.grab().save(sys.argv[3])
            busy = w.loader.busy or w.analysis.computing_sol() or w.runner.pending()
            if "paint" in seen and not busy:
                shot = w.grab().toImage()
                img = bytes(shot.constBits())[: shot.height() * shot.bytesPerLine()]  # compared whole, as bytes
                last = state["last"]
                if isinstance(last, bytes) and last == img:
                    # the window was complete at the grab before this one (this one confirms it)
                    seen["complete"], seen["cpu_complete"] = state["last_at"]  # type: ignore[misc]
                    seen["confirmed"] = now
                    print(json.dumps({**seen, "grabs": state["grabs"]}), flush=True)
                    w.close()
                    QApplication.instance().quit()  # type: ignore[union-attr]
                    return
                state["last"] = img
                state["last_at"] = (now, time.process_time())
            else:
                state["last"] = None

        timer = QTimer(app)
        timer.setInterval(int(every * 1000))
        timer.timeout.connect(probe)
        timer.start()
        return app

    app_module.create_app = create_app  # type: ignore[assignment]
    return cli.main([path])  # as `kviewer FILE` starts: the command line, then kviewer.ui.app.run


if __name__ == "__main__":
    sys.exit(main())
