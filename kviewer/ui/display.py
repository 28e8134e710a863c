"""Can the desktop window open here? Asked before Qt is imported (no Qt in this module).

Without a display, Qt's xcb plugin aborts the process (exit 134, "could not load the Qt platform
plugin ... Reinstalling the application may fix this"), which tells a user on a server nothing.
:func:`display_problem` finds the same conditions first and says what to do instead: run under a
virtual X server, or use the command-line subcommands, which need no display. Missing system
libraries of the xcb plugin are named with the apt-get line that installs them.
"""

from __future__ import annotations

import ctypes
import os
import socket
import sys
from collections.abc import Callable, Mapping

#: shared libraries Qt 6's xcb platform plugin loads -> the Debian/Ubuntu package that has it
XCB_LIBRARIES: dict[str, str] = {
    # what `ldd` lists for PySide6's plugins/platforms/libqxcb.so and libQt6XcbQpa.so.6
    "libX11.so.6": "libx11-6",
    "libX11-xcb.so.1": "libx11-xcb1",
    "libxcb.so.1": "libxcb1",
    "libxcb-cursor.so.0": "libxcb-cursor0",
    "libxcb-icccm.so.4": "libxcb-icccm4",
    "libxcb-image.so.0": "libxcb-image0",
    "libxcb-keysyms.so.1": "libxcb-keysyms1",
    "libxcb-randr.so.0": "libxcb-randr0",
    "libxcb-render.so.0": "libxcb-render0",
    "libxcb-render-util.so.0": "libxcb-render-util0",
    "libxcb-shape.so.0": "libxcb-shape0",
    "libxcb-shm.so.0": "libxcb-shm0",
    "libxcb-sync.so.1": "libxcb-sync1",
    "libxcb-util.so.1": "libxcb-util1",
    "libxcb-xfixes.so.0": "libxcb-xfixes0",
    "libxcb-xkb.so.1": "libxcb-xkb1",
    "libxkbcommon.so.0": "libxkbcommon0",
    "libxkbcommon-x11.so.0": "libxkbcommon-x11-0",
}

#: platforms that draw without a display server
HEADLESS_PLATFORMS = ("offscreen", "minimal", "vnc", "vkkhrdisplay", "eglfs", "linuxfb")

_ADVICE = (
    "Run it under a virtual display: `xvfb-run -a kviewer FILE`, or use the command-line "
    "subcommands, which need none: `kviewer summary|sol|report|screenshot FILE`"
)


def _can_load(name: str) -> bool:
    try:
        ctypes.CDLL(name)
    except OSError:
        return False
    return True


def x_server_reachable(display: str, timeout: float = 1.0) -> bool:
    """Whether an X server answers at ``display`` (``:0``, ``host:1.0``, ``unix:0``)."""
    host, _, rest = display.rpartition(":")
    number = rest.split(".", 1)[0]
    if not number.isdigit():
        return False
    if host.startswith("/"):  # launchd-style socket path (macOS XQuartz)
        return os.path.exists(display.rsplit(":", 1)[0] if ":" in display else display)
    try:
        if host in ("", "unix"):
            path = f"/tmp/.X11-unix/X{number}"
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(timeout)
                try:
                    s.connect(path)
                except OSError:
                    # Linux also has the abstract socket of the same name
                    s.connect("\0" + path)
            return True
        with socket.create_connection((host, 6000 + int(number)), timeout=timeout):
            return True
    except OSError:
        return False


def display_problem(
    env: Mapping[str, str] | None = None,
    platform: str | None = None,
    can_load: Callable[[str], bool] = _can_load,
    reachable: Callable[[str], bool] = x_server_reachable,
) -> str | None:
    """Why the desktop window cannot open here (one or two lines), or None when it can."""
    env = os.environ if env is None else env
    platform = sys.platform if platform is None else platform
    if not platform.startswith("linux") and "bsd" not in platform:
        return None  # macOS and Windows always have their own window system
    qpa = env.get("QT_QPA_PLATFORM", "").split(":", 1)[0].strip().lower()
    if qpa in HEADLESS_PLATFORMS:
        return None
    display, wayland = env.get("DISPLAY", ""), env.get("WAYLAND_DISPLAY", "")
    if qpa.startswith("wayland") or (not qpa and wayland):
        return None  # a Wayland session: Qt's wayland plugin finds its compositor itself
    if qpa not in ("", "xcb"):
        return None  # another platform plugin chosen on purpose: Qt reports its own problems
    if not display:
        return f"no display found (DISPLAY and WAYLAND_DISPLAY are not set)\n{_ADVICE}"
    if not reachable(display):
        return f"no display reachable at DISPLAY={display}\n{_ADVICE}"
    missing = [lib for lib in XCB_LIBRARIES if not can_load(lib)]
    if missing:
        packages = " ".join(dict.fromkeys(XCB_LIBRARIES[lib] for lib in missing))
        return (
            f"the window needs system libraries that are missing: {', '.join(missing)}\n"
            f"Install them with `apt-get install -y {packages}`, or use the command-line subcommands "
            "(`kviewer summary|sol|report|screenshot FILE`), which need none"
        )
    return None
