"""GPUs that were mis-named before: consumer cards in the table, a name missing from it, and an AMD
trace whose device names are empty (identified by gfx family + CU count + memory)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from kviewer.analysis.devices import load_devices, recognise, recognise_trace
from kviewer.io import load


@pytest.mark.parametrize(("name", "cc", "sm", "dev_id"), [
    ("NVIDIA GeForce RTX 3080", "8.6", 68, "rtx_3080"), ("NVIDIA GeForce RTX 3090", "8.6", 82, "rtx_3090"),
    ("NVIDIA GeForce RTX 4080", "8.9", 76, "rtx_4080"), ("NVIDIA RTX A6000", "8.6", 84, "rtx_a6000"),
    ("NVIDIA RTX 6000 Ada Generation", "8.9", 142, "rtx_6000_ada"),
    ("NVIDIA GeForce RTX 5090", "12.0", 170, "rtx_5090"), ("NVIDIA GeForce RTX 5080", "12.0", 84, "rtx_5080"),
    ("NVIDIA GeForce RTX 5070 Ti", "12.0", 70, "rtx_5070_ti"), ("NVIDIA GeForce RTX 5070", "12.0", 48, "rtx_5070"),
])
def test_consumer_and_workstation_in_the_table(name: str, cc: str, sm: int, dev_id: str) -> None:
    r = recognise(name=name, compute_capability=cc, sm_count=sm)
    assert r.spec is not None and r.spec.id == dev_id and r.spec.sm_count == sm


def test_whitepaper_figures() -> None:
    d = load_devices()
    # GA102 whitepaper, Appendix A: FP32 = SMs x 128 lanes x 2 (FMA) x boost clock
    for key in ("rtx_3080", "rtx_3090", "rtx_4080", "rtx_a6000", "rtx_6000_ada", "rtx_5090", "rtx_5080", "rtx_5070_ti", "rtx_5070"):
        s = d[key]
        assert s.rates["fp32_tflops"] == pytest.approx(s.sm_count * 128 * 2 * s.boost_clock_mhz * 1e6 / 1e12, rel=0.01)
    assert d["rtx_3080"].dram_gbs == 760 and d["rtx_3090"].dram_gbs == 936


def test_rtx_50_tensor_rates_follow_the_published_ai_tops() -> None:
    """NVIDIA publishes one tensor figure per GeForce RTX 50 card, "AI TOPS" (FP4 with sparsity);
    the table's FP8 and FP16 rates are that figure halved for dense, FP8 and FP32 accumulate (and
    FP16 half of FP8), as the Ada whitepaper's GeForce columns are, and say so in ``sources``."""
    d = load_devices()
    for key, ai_tops, bus_bits, gbps in (("rtx_5090", 3352, 512, 28), ("rtx_5080", 1801, 256, 30),
                                         ("rtx_5070_ti", 1406, 256, 28), ("rtx_5070", 988, 192, 28)):
        s = d[key]
        assert s.rates["fp8_tflops"] == pytest.approx(ai_tops / 8, rel=0.005)
        assert s.rates["fp16_tflops"] == s.rates["bf16_tflops"] == pytest.approx(ai_tops / 16, rel=0.005)
        assert s.dram_gbs == bus_bits / 8 * gbps
        assert s.architecture == "sm_120"
    # a variant the table does not hold is named as missing, not matched to its sibling
    r = recognise(name="NVIDIA GeForce RTX 5090 D", compute_capability="12.0", sm_count=170)
    assert r.spec is None and "not in kviewer's device table" in r.how


def test_a_name_missing_from_the_table_is_said_so_not_guessed() -> None:
    # an RTX 3080 Ti has 80 sm_86 SMs, as an A10G does: not the same GPU
    r = recognise(name="NVIDIA GeForce RTX 3080 Ti", compute_capability="8.6", sm_count=80)
    assert r.spec is None and not r.ambiguous
    assert "not in kviewer's device table" in r.how and "--device" in r.how


def test_amd_with_empty_names_from_gfx_and_cus(samples: Path, tmp_path: Path) -> None:
    src = samples / "torch" / "tracelens_mi300" / "gaunernst_bert-small-uncased__1016001.json.gz"
    with gzip.open(src, "rt") as f:
        doc = json.load(f)
    for p in doc["deviceProperties"]:
        p["name"] = ""  # as in the public MI300X trace of the issue
    out = tmp_path / "mi300x_noname.json"
    out.write_text(json.dumps(doc))
    trace = load(out)
    rec = recognise_trace(trace)
    assert rec and all(r.spec is not None and r.spec.id == "mi300x" for r in rec.values())
