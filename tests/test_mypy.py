"""mypy over every module of kviewer (the [tool.mypy] section of pyproject.toml: ui, cli, report,
fleet and sqldb as well as core, io, analysis and session) finds no error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ["kviewer"]

pytestmark = pytest.mark.timeout(900)


def test_mypy_is_clean_on_every_module() -> None:
    pytest.importorskip("mypy", reason="mypy is in the 'test' extra (pip install -e .[test])")
    import pandas as pd

    if int(pd.__version__.split(".")[0]) < 3:
        # the types are checked against pandas 3's stubs (and numpy 2.3+'s); Python 3.10 installs
        # pandas 2 and numpy 2.2, whose stubs type many calls differently. The 3.11+ runs check.
        pytest.skip(f"types are checked with pandas 3's stubs; this environment has pandas {pd.__version__}")
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(ROOT / ".mypy_cache"), *PACKAGES],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=850,
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
