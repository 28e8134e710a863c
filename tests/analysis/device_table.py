"""The device table as ``kviewer/resources/devices.toml`` holds it, read with the TOML parser alone
(not through kviewer's loader): the tests check kviewer's peaks and bandwidths against it."""

from __future__ import annotations

from importlib import resources
from typing import Any

from kviewer.analysis.devices import tomllib  # tomli on Python 3.10

#: every device entry of the file, by id
RAW: dict[str, dict[str, Any]] = tomllib.loads(resources.files("kviewer").joinpath("resources", "devices.toml").read_text("utf-8"))["devices"]


def raw_value(gpu: str, field: str) -> float:
    """One field of one device, as the file writes it (TFLOP/s, GB/s, ...)."""
    return float(RAW[gpu][field])
