"""Timeline colours: one palette of hue families, indexed by small integers (no Qt: ``kviewer.ui.colors`` turns them into brushes).

Bars carry a ``uint16`` palette index so a frame can batch its rectangles by colour. A kernel's
family says what it is bound by -- memory (warm), compute (green) or unknown (blue) -- as soon as
the kernels table has a ``bound`` column ("memory" / "compute" / ""). Within a family the shade is a
stable hash of the short name, so the same kernel has the same colour in every run and every
trace. Every colour also has a dimmed twin (``index + DIM``) for bars outside the current
highlight (a table filter or a selected group).
"""

from __future__ import annotations

import colorsys
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np

SHADES = 12

#: family name -> (hue range in degrees, saturation, lightness range)
FAMILIES: dict[str, tuple[tuple[float, float], float, tuple[float, float]]] = {
    "kernel": ((196.0, 232.0), 0.55, (0.52, 0.72)),
    "kernel_memory": ((14.0, 40.0), 0.78, (0.55, 0.70)),
    "kernel_compute": ((105.0, 150.0), 0.50, (0.45, 0.62)),
    "memcpy": ((292.0, 320.0), 0.55, (0.55, 0.70)),
    "memset": ((262.0, 278.0), 0.45, (0.58, 0.70)),
    # copies by direction, as Nsight Systems tells them apart (DtoD and the rest: "memcpy")
    "memcpy_htod": ((160.0, 172.0), 0.62, (0.40, 0.50)),
    "memcpy_dtoh": ((236.0, 246.0), 0.62, (0.50, 0.60)),
    "memcpy_ptop": ((62.0, 74.0), 0.60, (0.40, 0.50)),
    "runtime": ((46.0, 58.0), 0.75, (0.58, 0.70)),
    "op": ((28.0, 44.0), 0.38, (0.62, 0.76)),
    "python": ((200.0, 220.0), 0.08, (0.70, 0.82)),
    "annotation": ((320.0, 345.0), 0.45, (0.66, 0.78)),
    "sync": ((0.0, 8.0), 0.60, (0.60, 0.70)),
    "other": ((0.0, 0.0), 0.0, (0.68, 0.80)),
}
FAMILY_ORDER: list[str] = list(FAMILIES)
FAMILY_INDEX: dict[str, int] = {name: i for i, name in enumerate(FAMILY_ORDER)}
#: offset of the dimmed twin of every colour
DIM = len(FAMILY_ORDER) * SHADES
#: background the dimmed colours fade towards
BACKGROUND = (250, 250, 250)

#: cpu_slices.category -> family
CPU_FAMILY = {
    "runtime": "runtime",
    "driver": "runtime",
    "op": "op",
    "python": "python",
    "annotation": "annotation",
    "nvtx": "annotation",
    "gpu_annotation": "annotation",
    "sync": "sync",
}


def _rgb(family: str, shade: int) -> tuple[int, int, int]:
    (h0, h1), sat, (l0, l1) = FAMILIES[family]
    # spread shades so neighbours in hash order differ in both hue and lightness
    f = shade / max(SHADES - 1, 1)
    g = ((shade * 5) % SHADES) / max(SHADES - 1, 1)
    r, gr, b = colorsys.hls_to_rgb((h0 + (h1 - h0) * f) / 360.0, l0 + (l1 - l0) * g, sat)
    return int(r * 255), int(gr * 255), int(b * 255)


def palette_rgb() -> list[tuple[int, int, int]]:
    """Every palette colour as RGB, normal ones first, then their dimmed twins."""
    normal = [_rgb(fam, s) for fam in FAMILY_ORDER for s in range(SHADES)]
    dimmed = [tuple(int(c + (bg - c) * 0.78) for c, bg in zip(rgb, BACKGROUND)) for rgb in normal]
    return normal + dimmed  # type: ignore[operator]


def stable_shade(text: str) -> int:
    """A shade that depends only on the text (crc32, not Python's salted hash)."""
    return zlib.crc32(text.encode("utf-8", "replace")) % SHADES


def _categorical(values: Any) -> tuple[np.ndarray, Sequence[str]]:
    """(codes, categories) of a pandas categorical or any array of strings."""
    if hasattr(values, "cat"):
        return np.asarray(values.cat.codes), [str(c) for c in values.cat.categories]
    arr = np.asarray(values, dtype=object)
    cats, codes = np.unique(arr.astype(str), return_inverse=True)
    return codes, list(cats)


def kernel_colours(short_names: Any, bound: Any = None) -> np.ndarray:
    """Palette indices for kernels: family by ``bound``, shade by a hash of the short name."""
    codes, cats = _categorical(short_names)
    shades = np.array([stable_shade(c) for c in cats] + [0], dtype=np.uint16)
    shade = shades[codes]  # code -1 (missing) picks the trailing 0
    family = np.full(codes.shape[0], FAMILY_INDEX["kernel"], dtype=np.uint16)
    if bound is not None:
        b = np.asarray(bound, dtype=object).astype(str)
        family[b == "memory"] = FAMILY_INDEX["kernel_memory"]
        family[b == "compute"] = FAMILY_INDEX["kernel_compute"]
    return (family * SHADES + shade).astype(np.uint16)


#: gpu_ops.direction -> family of a copy in that direction
COPY_FAMILY = {"HtoD": "memcpy_htod", "DtoH": "memcpy_dtoh", "PtoP": "memcpy_ptop"}


def gpu_op_colours(kinds: Any, names: Any, directions: Any = None) -> np.ndarray:
    """memset in the purple family; memcpy by direction (host to device teal, device to host
    blue, peer to peer olive, device to device and the rest magenta); shade by the op's name."""
    k = np.asarray(kinds, dtype=object).astype(str)
    codes, cats = _categorical(names)
    shades = np.array([stable_shade(c) for c in cats] + [0], dtype=np.uint16)[codes]
    family = np.where(k == "memset", FAMILY_INDEX["memset"], FAMILY_INDEX["memcpy"]).astype(np.uint16)
    if directions is not None:
        d = np.asarray(directions, dtype=object).astype(str)
        for direction, fam in COPY_FAMILY.items():
            family[(d == direction) & (k != "memset")] = FAMILY_INDEX[fam]
    return (family * SHADES + shades).astype(np.uint16)


def cpu_colours(categories: Any, names: Any) -> np.ndarray:
    """Host slices: family by category (runtime, op, python, annotation, ...), shade by name."""
    ccodes, ccats = _categorical(categories)
    fam_of_cat = np.array(
        [FAMILY_INDEX[CPU_FAMILY.get(c, "other")] for c in ccats] + [FAMILY_INDEX["other"]], dtype=np.uint16
    )
    family = fam_of_cat[ccodes]
    ncodes, ncats = _categorical(names)
    shades = np.array([stable_shade(c) for c in ncats] + [0], dtype=np.uint16)[ncodes]
    return (family * SHADES + shades).astype(np.uint16)


def text_colour_is_dark(rgb: tuple[int, int, int]) -> bool:
    """True when black text reads better than white on this colour (relative luminance)."""
    r, g, b = (c / 255.0 for c in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.45
