"""MFU per step against independent counts: torch.profiler's own key_averages() FLOPs (the *_flops.json
files beside the samples), the raw trace JSON (step ranges, attention shapes and causal flags) and the
raw devices.toml peak."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kviewer.analysis.mfu import compare_mfu, mfu, mfu_for_step_time
from kviewer.analysis.model import attention_recompute_share
from kviewer.io import load
from tests.analysis.device_table import raw_value



def h200_peak(field: str) -> float:
    """The dense peak of the H200 in devices.toml, read without kviewer."""
    return raw_value("h200", field) * 1e12


def raw_events(path: Path) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    return events


def torch_flops(path: Path) -> tuple[dict[str, float], int]:
    """key_averages() FLOPs per op name (summed over input shapes) and the profiled iterations."""
    doc = json.loads(path.read_text())
    total: dict[str, float] = {}
    for r in doc["by_shape"]:
        total[r["key"]] = total.get(r["key"], 0.0) + float(r["flops"])
    return total, int(doc["iters"])


def raw_steps(events: list[dict[str, Any]]) -> dict[str, tuple[float, float, float]]:
    """step name -> (host start µs, host dur µs, GPU annotation dur µs) from the raw events."""
    host = {e["name"]: (float(e["ts"]), float(e["dur"])) for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("step_")}
    gpu = {e["name"]: float(e["dur"]) for e in events if e.get("cat") == "gpu_user_annotation" and e["name"].startswith("step_")}
    return {n: (s, d, gpu.get(n, 0.0)) for n, (s, d) in host.items()}


def raw_attention_flops(events: list[dict[str, Any]], t0: float, t1: float) -> float:
    """FLOPs of the SDPA calls inside [t0, t1] (µs): 2·B·H·Lq·Lk·(D+Dv), halved when is_causal."""
    total = 0.0
    for e in events:
        if e.get("cat") == "cpu_op" and e["name"] == "aten::scaled_dot_product_attention" and t0 <= float(e["ts"]) <= t1:
            q, k, v = e["args"]["Input Dims"][:3]
            causal = e["args"]["Concrete Inputs"][5] == "True"
            b, h, lq, d = q
            total += 2.0 * b * h * lq * k[2] * (d + v[3]) * (0.5 if causal else 1.0)
    return total


def test_block2_inference_mfu_matches_torch_counts(sample_traces: Path) -> None:
    """Forward only (inference): model FLOPs = torch's aten::mm FLOPs (2 x params x tokens) plus
    the causal attention, within 1 %; MFU = that / (step time x the BF16 dense peak)."""
    path = sample_traces / "h200_block2_eager.pt.trace.json.gz"
    events = raw_events(path)
    flops, iters = torch_flops(sample_traces / "h200_block2_eager_flops.json")
    mm_per_step = flops["aten::mm"] / iters
    peak = h200_peak("bf16_tflops")
    res = mfu(load(path))
    steps = raw_steps(events)
    assert len(res.steps) == len(steps) == 2
    for row in res.steps.to_dict(orient="records"):
        start, host_us, gpu_us = steps[row["name"]]
        expected = mm_per_step + raw_attention_flops(events, start, start + host_us)
        assert row["model_flops"] == pytest.approx(expected, rel=0.01)
        # the matmuls alone are more than 95 % of it: the test is about them
        assert mm_per_step / row["model_flops"] > 0.95
        # the step time: the host range, or the GPU's own span of the step when longer
        step_ns = max(host_us, gpu_us) * 1e3
        assert row["step_ns"] == pytest.approx(step_ns, abs=2)
        assert row["peak_flops"] == peak and row["precision"] == "bf16"
        assert row["mfu"] == pytest.approx(expected / (step_ns * 1e-9 * peak), rel=0.01)
        # no backward: nothing recomputed, every kernel's FLOPs known
        assert row["hfu"] == pytest.approx(row["mfu"], rel=1e-9)
        assert row["unknown_kernels"] == 0 and row["unknown_ns"] == 0
        # the split covers the step exactly (one GPU), and the SOL is below the step
        parts = row["compute_ns"] + row["memory_ns"] + row["unknown_bound_ns"] + row["idle_ns"]
        assert parts == pytest.approx(row["step_ns"], abs=1)
        assert 0 < row["sol_step"] <= 1 and row["mfu"] < row["sol_step"]
    # over all steps: summed FLOPs over summed step times
    tot = res.totals
    assert tot["mfu"] == pytest.approx(res.steps["model_flops"].sum() / (res.steps["step_ns"].sum() * 1e-9 * peak), rel=1e-9)


def test_resnet18_training_counts_every_conv_once(sample_traces: Path) -> None:
    """Training: each convolution's forward as torch counts it, its backward's input and weight
    gradients the same again each (the first layer has no input gradient); the fc layer's addmm
    and its two backward mm exactly as torch counts them."""
    path = sample_traces / "h200_resnet18_train.pt.trace.json.gz"
    flops, iters = torch_flops(sample_traces / "h200_resnet18_train_flops.json")
    doc = json.loads((sample_traces / "h200_resnet18_train_flops.json").read_text())
    first = sum(float(r["flops"]) for r in doc["by_shape"] if r["key"] == "aten::conv2d" and r["input_shapes"].startswith("[[16, 3, 224, 224]"))
    conv_fwd = flops["aten::conv2d"] / iters
    expected_conv = 3 * conv_fwd - first / iters
    expected_gemm = (flops["aten::addmm"] + flops["aten::mm"]) / iters
    trace = load(path)
    res = mfu(trace)
    assert len(res.steps) == 2
    from kviewer.analysis.mfu import kernel_flops
    from kviewer.analysis.sol import sol_result
    from kviewer.analysis.steps import find_steps, kernel_steps

    sol = sol_result(trace)
    kf = kernel_flops(trace, sol)
    of = kernel_steps(trace, find_steps(trace, detect=False))
    kind = sol.table["kind"].astype(str).to_numpy()
    for i, row in enumerate(res.steps.to_dict(orient="records")):
        in_step = of == i
        assert np.nansum(kf.model[in_step & (kind == "conv")]) == pytest.approx(expected_conv, rel=1e-6)
        assert np.nansum(kf.model[in_step & (kind == "gemm")]) == pytest.approx(expected_gemm, rel=1e-6)
        # convolutions and the fc layer are nearly all of it (norms, ReLUs, the optimizer the rest)
        assert row["model_flops"] == pytest.approx(expected_conv + expected_gemm, rel=0.01)
        # unknown FLOPs are reported with the time they cover, never as 0 FLOPs silently
        unknown = in_step & np.isnan(kf.model)
        assert row["unknown_kernels"] == int(unknown.sum()) > 0
        assert row["unknown_ns"] == pytest.approx(float(sol.table["dur"].to_numpy()[unknown].sum()))
        assert row["mfu"] == pytest.approx(row["model_flops"] / (row["step_ns"] * 1e-9 * h200_peak("bf16_tflops")), rel=1e-9)


def test_attention_backward_recompute_is_hardware_not_model() -> None:
    """Flash attention's backward recomputes QK^T: D of its 3·D + 2·Dv per score pair."""
    dims = json.dumps([[4, 16, 1024, 128]] * 4 + [[4, 16, 1024]])
    types = json.dumps(["c10::BFloat16"] * 4 + ["float"])
    assert attention_recompute_share("aten::_scaled_dot_product_flash_attention_backward", dims, types) == pytest.approx(128 / (5 * 128))
    assert attention_recompute_share("aten::_scaled_dot_product_flash_attention", dims, types) == 0.0
    assert attention_recompute_share("aten::mm", dims, types) == 0.0
    assert math.isnan(attention_recompute_share("aten::_scaled_dot_product_flash_attention_backward", "[]", "[]"))


def test_mfu_for_step_time_and_unknowns() -> None:
    assert mfu_for_step_time(989.5e12 * 1e-3, 989.5e12, 1e6) == pytest.approx(1.0)
    assert mfu_for_step_time(1e12, 989.5e12, 2e6) == pytest.approx(1e12 / (2e-3 * 989.5e12))
    for bad in ((math.nan, 1e12, 1e6), (1e12, math.nan, 1e6), (1e12, 1e12, 0), (1e12, 0.0, 1e6)):
        assert math.isnan(mfu_for_step_time(*bad))


def test_job_mfu_over_ranks(sample_traces: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Three ranks running the same steps: the job's FLOPs are three ranks' worth over three peaks,
    so its MFU equals one rank's (a double count or a single peak would be off by 3x)."""
    from kviewer.io import ranks as io_ranks
    from tests.io.test_ranks import write_rank

    monkeypatch.setenv(io_ranks.ENV_WORKERS, "1")
    doc = json.loads(gzip.decompress((sample_traces / "h200_block2_eager.pt.trace.json.gz").read_bytes()))
    for r in range(3):
        write_rank(tmp_path / "run", f"w{r}.json", doc, r)
    one = mfu(load(sample_traces / "h200_block2_eager.pt.trace.json.gz"))
    job = mfu(load(tmp_path / "run"))
    assert sorted(job.steps["rank"].unique()) == [0, 1, 2]
    assert len(job.job) == 2 and (job.job["ranks"] == 3).all()
    for a, b in zip(one.job.to_dict(orient="records"), job.job.to_dict(orient="records")):
        assert b["model_flops"] == pytest.approx(3 * a["model_flops"], rel=1e-9)
        assert b["peak_flops"] == pytest.approx(3 * a["peak_flops"], rel=1e-12)
        assert b["mfu"] == pytest.approx(a["mfu"], rel=1e-6)
        ranks = job.steps[job.steps["step"] == b["step"]]
        assert b["step_ns"] == ranks["step_ns"].max()


def test_compare_mfu_delta_in_points(sample_traces: Path) -> None:
    a = mfu(load(sample_traces / "h200_block2_eager.pt.trace.json.gz"))
    b = mfu(load(sample_traces / "h200_llm_block_compiled.pt.trace.json.gz"))
    df = compare_mfu(a, b)
    assert len(df) == max(len(a.job), len(b.job))
    both = df.dropna(subset=["mfu_a", "mfu_b"])
    assert len(both)
    assert np.allclose(both["delta_pts"], (both["mfu_b"] - both["mfu_a"]) * 100)


# ---------------------------------------------------------------------------------------------
# the small GPT of the gpu-data helper (sample_traces/gpt_*.json: config, params in matmuls, tokens,
# torch key_averages() FLOPs and the profiled steps' own times, measured on the H200)


def gpt(sample_traces: Path, what: str) -> tuple[dict[str, Any], Any]:
    doc = json.loads((sample_traces / f"gpt_{what}.json").read_text())
    return doc, mfu(load(sample_traces / f"gpt_{what}.pt.trace.json.gz"))


@pytest.mark.parametrize("what, matmul_factor, attention_factor", [("train", 6, 3), ("infer", 2, 1)])
def test_gpt_model_flops_are_6NT_or_2NT_plus_attention(sample_traces: Path, what: str, matmul_factor: int, attention_factor: int) -> None:
    """Training: 6 x params-in-matmuls x tokens (forward 2, backward 4) plus the causal attention
    three times (forward, and backward at twice the forward without its recomputation);
    inference: 2 x params x tokens plus the forward attention. Within 1 %, and MFU = that /
    (step time x the BF16 dense peak) within 1 %."""
    doc, res = gpt(sample_traces, what)
    n, tokens = doc["matmul_params"], doc["tokens_per_step"]
    steps = doc["profiled_steps"]
    # torch's own count of the matmuls is exactly 2·N·T per pass
    assert doc["flops_by_op"]["aten::mm"]["flops"] / len(steps) == matmul_factor * n * tokens
    cfg = doc["config"]
    attn_causal_fwd = 4 * cfg["batch"] * cfg["seq"] ** 2 * cfg["d_model"] * cfg["n_layer"] / 2
    assert attn_causal_fwd * 2 == doc["attn_flops_fwd_full_4BT2d_per_layer_x_L"]
    expected = matmul_factor * n * tokens + attention_factor * attn_causal_fwd
    peak = h200_peak("bf16_tflops")
    assert len(res.steps) == len(steps)
    for row, ref in zip(res.steps.to_dict(orient="records"), steps):
        assert row["name"] == ref["name"]
        assert row["model_flops"] == pytest.approx(expected, rel=0.01)
        assert row["step_ns"] == pytest.approx(max(ref["cpu_dur_us"], ref["gpu_annotation_dur_us"]) * 1e3, abs=2)
        assert row["precision"] == "bf16" and row["peak_flops"] == peak
        assert row["mfu"] == pytest.approx(expected / (row["step_ns"] * 1e-9 * peak), rel=0.01)
        recompute = row["hardware_flops"] - row["model_flops"]
        if what == "train":
            # flash attention's backward recomputes QK^T: half the causal forward per step
            assert recompute == pytest.approx(attn_causal_fwd / 2, rel=1e-9)
            assert row["hfu"] > row["mfu"]
        else:
            assert recompute == 0 and row["hfu"] == row["mfu"]
        parts = row["compute_ns"] + row["memory_ns"] + row["unknown_bound_ns"] + row["idle_ns"]
        assert parts == pytest.approx(row["step_ns"], abs=1)
        # the split's kernel time is the profiled step's own GPU busy time (measured by the data's
        # script over kernels, memsets and copies) less the few µs of the memsets and copies
        busy = parts - row["idle_ns"]
        assert 0.98 * ref["gpu_busy_us"] * 1e3 <= busy <= ref["gpu_busy_us"] * 1e3


def test_gpt_summary_steps_columns(sample_traces: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kviewer import cli

    assert cli.main(["summary", str(sample_traces / "gpt_train.pt.trace.json.gz"), "--steps", "--format", "json", "-q"]) == 0
    out = json.loads(capsys.readouterr().out)
    doc, res = gpt(sample_traces, "train")
    for s, row in zip(out["steps"], res.job.to_dict(orient="records")):
        assert {"mfu", "hfu", "sol_step", "model_flops"} <= set(s)
        assert s["mfu"] == pytest.approx(row["mfu"], rel=1e-12) and s["model_flops"] == row["model_flops"]
    assert out["mfu"]["totals"]["mfu"] == pytest.approx(res.totals["mfu"], rel=1e-12)
    assert cli.main(["summary", str(sample_traces / "gpt_train.pt.trace.json.gz"), "--steps", "--format", "csv", "-q"]) == 0
    header = capsys.readouterr().out.splitlines()[0].split(",")
    assert header[-4:] == ["model_flops", "mfu", "hfu", "sol_step"]


def test_compare_and_report_show_mfu(sample_traces: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``kviewer compare`` puts A's and B's MFU per step side by side (delta in points), and the
    report's headline is the trace's MFU over all its steps."""
    from kviewer import cli

    a, b = sample_traces / "gpt_infer.pt.trace.json.gz", sample_traces / "gpt_train.pt.trace.json.gz"
    assert cli.main(["compare", str(a), str(b), "--format", "json", "-q"]) == 0
    doc = json.loads(capsys.readouterr().out)
    ma, mb = mfu(load(a)).job, mfu(load(b)).job
    assert len(doc["mfu"]) == 3
    for row, ra, rb in zip(doc["mfu"], ma.to_dict(orient="records"), mb.to_dict(orient="records")):
        assert row["mfu_a"] == pytest.approx(ra["mfu"]) and row["mfu_b"] == pytest.approx(rb["mfu"])
        assert row["delta_pts"] == pytest.approx((rb["mfu"] - ra["mfu"]) * 100)
    assert cli.main(["report", str(b), "-o", str(tmp_path / "r.md"), "-q"]) == 0
    text = (tmp_path / "r.md").read_text(encoding="utf-8")
    total = mfu(load(b)).totals
    assert f"3 steps: MFU ≥ {total['mfu'] * 100:.1f}%" in text


def test_projected_mfu_at_a_projected_step_time(sample_traces: Path) -> None:
    """What-if: the same model FLOPs at a shorter step time; halving the time doubles the MFU."""
    from kviewer.analysis.mfu import projected_mfu

    res = mfu(load(sample_traces / "gpt_train.pt.trace.json.gz"))
    steps = res.steps.to_dict(orient="records")
    df = projected_mfu(res, [(s["name"], s["step_ns"] / 2) for s in steps] + [("ProfilerStep#99", 1e6)])
    assert len(df) == len(steps) + 1
    for s, row in zip(steps, df.to_dict(orient="records")):
        assert row["projected_mfu"] == pytest.approx(2 * s["mfu"], rel=1e-12)
        assert row["delta_pts"] == pytest.approx(s["mfu"] * 100, rel=1e-9)
    assert math.isnan(df["projected_mfu"].iloc[-1])


def test_counters_change_hfu_not_mfu(sample_traces: Path, samples: Path) -> None:
    """An Nsight Compute report attached (the shared h200_llm_block_eager.ncu-rep, without tensor
    counters): the model FLOPs, so MFU, stay exactly the model's; the hardware FLOPs take the
    counters of every kernel they measured (kviewer sol's measured FLOPs, themselves checked against
    the report in test_measured_flops) and the model elsewhere (GEMMs whose tensor pipe was not
    counted)."""
    from kviewer.analysis.attach import attach_counters
    from kviewer.analysis.model import model_kernels
    from kviewer.analysis.sol import sol_result
    from kviewer.analysis.steps import find_steps, kernel_steps

    timeline = load(sample_traces / "h200_llm_block_eager.pt.trace.json.gz")
    attached = attach_counters(timeline, load(samples / "ncu" / "h200_llm_block_eager.ncu-rep")).trace
    before, after = mfu(timeline), mfu(attached)
    assert np.array_equal(before.steps["model_flops"], after.steps["model_flops"])
    assert np.array_equal(before.steps["mfu"], after.steps["mfu"])
    sol = sol_result(attached).table
    measured = (sol["flops_source"] == "measured").to_numpy()
    model = model_kernels(attached)["model_flops"].to_numpy(np.float64)
    of = kernel_steps(attached, find_steps(attached, detect=False))
    flops = sol["flops"].to_numpy(np.float64)
    for i, row in enumerate(after.steps.to_dict(orient="records")):
        step = of == i
        # counters reach only the same kernel at the same place in each step (#26): 17 of the step's launches
        assert (measured & step).sum() >= 15
        expected = flops[measured & step].sum() + np.nansum(model[~measured & step])
        assert row["hardware_flops"] == pytest.approx(expected, rel=1e-12)
        assert row["hardware_flops"] > row["model_flops"]  # GELU and layer norm execute more than the model's 1 and 7 per element
        assert row["hfu"] == pytest.approx(row["hardware_flops"] / (row["step_ns"] * 1e-9 * row["peak_flops"]), rel=1e-12)


def test_unknown_flops_stay_unknown_never_zero(sample_traces: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An Nsight Systems export has no op shapes: the GEMMs' FLOPs are unknown, and the few known
    zeros (fills, copies) make no MFU of 0 -- the columns are empty in CSV, null in JSON, and the
    kernel time without FLOPs is reported."""
    from kviewer import cli

    path = sample_traces / "h200_llm_train_nvtx.sqlite.gz"
    res = mfu(load(path))
    assert len(res.steps)
    assert res.steps["model_flops"].isna().all() and res.steps["mfu"].isna().all() and res.steps["hfu"].isna().all()
    assert (res.steps["unknown_ns"] > 0).all()
    assert cli.main(["summary", str(path), "--steps", "--format", "csv", "-q"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith("model_flops,mfu,hfu,sol_step")
    assert all(line.split(",")[-4:-1] == ["", "", ""] for line in lines[1:])
    assert cli.main(["summary", str(path), "--steps", "--format", "json", "-q"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert all(s["mfu"] is None for s in doc["steps"]) and all(r["mfu"] is None for r in doc["mfu"]["steps"])


def test_tensor_counters_are_the_hardware_flops(sample_traces: Path) -> None:
    """`ncu --set full` of one whole step (gemm_grid, issue 26's data) attached to the Kineto trace
    of the same program: the hardware FLOPs of the GEMMs and the flash attention are the tensor
    pipe's own count (``sm__ops_path_tensor_src_bf16_dst_fp32.sum``, read from the raw CSV here);
    the cuDNN causal kernel computes 12.5 % more than the causal model (whole diagonal tiles), so
    HFU > MFU while the model FLOPs -- and MFU -- do not move."""
    import csv
    import io as _io

    from kviewer.analysis.attach import attach_counters
    from kviewer.analysis.mfu import kernel_flops
    from kviewer.analysis.sol import sol_result
    from kviewer.analysis.steps import find_steps, kernel_steps

    raw = sample_traces / "gemm_grid_step1_full.raw.csv.gz"
    rows = list(csv.reader(_io.TextIOWrapper(gzip.open(raw), encoding="utf-8")))
    col = rows[0].index("sm__ops_path_tensor_src_bf16_dst_fp32.sum")
    tensor_per_step = sum(float(r[col].replace(",", "") or 0) for r in rows[2:])
    assert len(rows) - 2 == 24 and tensor_per_step > 8e11
    timeline = load(sample_traces / "gemm_grid_block2_eager.pt.trace.json.gz")
    attached = attach_counters(timeline, load(raw)).trace
    before, after = mfu(timeline), mfu(attached)
    assert np.array_equal(before.steps["model_flops"], after.steps["model_flops"])
    sol = sol_result(attached)
    kf = kernel_flops(attached, sol)
    of = kernel_steps(attached, find_steps(attached, detect=False))
    kind = sol.table["kind"].astype(str).to_numpy()
    # the kernels that carry counters (the first profiled step also starts with 5 kernels of the
    # warm-up step whose launches the profiler did not see: no op, FLOPs unknown)
    matrix = np.isin(kind, ["gemm", "attention"]) & (attached.kernels["counters"].astype(str).to_numpy() != "")
    for i, row in enumerate(after.steps.to_dict(orient="records")):
        assert kf.hardware[(of == i) & matrix].sum() == pytest.approx(tensor_per_step, rel=1e-9)
        assert ((of == i) & matrix).sum() == 10  # 8 GEMMs and 2 attention kernels per step
        att = (of == i) & (kind == "attention")
        assert kf.hardware[att].sum() / kf.model[att].sum() == pytest.approx(1.125, rel=1e-6)
        assert row["hfu"] > row["mfu"] == before.steps["mfu"].iloc[i]


def test_more_than_the_peak_is_unknown_not_reported(sample_traces: Path) -> None:
    """The H200 trace's steps on a T4's peaks (a wrong --device): more FLOP/s than the peak is a
    model or device error, so MFU and HFU are unknown with a note, in the steps, the job and the
    totals alike."""
    path = sample_traces / "h200_block2_eager.pt.trace.json.gz"
    res = mfu(load(path), device="t4")
    raw = res.steps["model_flops"] / (res.steps["step_ns"] * 1e-9 * res.steps["peak_flops"])
    assert (raw > 1).all()
    assert res.steps["mfu"].isna().all() and res.steps["hfu"].isna().all()
    assert (res.steps["note"].str.len() > 0).all()
    assert res.job["mfu"].isna().all() and math.isnan(res.totals["mfu"])
    ok = mfu(load(path))
    assert (ok.steps["note"] == "").all() and ok.steps["mfu"].notna().all()


def test_summary_steps_device(sample_traces: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``summary --steps --device``: the named GPU's peaks (an MI250X GCD here: its BF16 rate), a
    name the table does not know is a user error (exit 2)."""
    from kviewer import cli

    path = str(sample_traces / "h200_block2_eager.pt.trace.json.gz")
    assert cli.main(["summary", path, "--steps", "--device", "mi250x_gcd", "--format", "json", "-q"]) == 0
    doc = json.loads(capsys.readouterr().out)
    peak = raw_value("mi250x_gcd", "bf16_tflops") * 1e12
    assert all(r["peak_flops"] == peak for r in doc["mfu"]["steps"])
    assert cli.main(["summary", path, "--steps", "--device", "nosuchgpu", "-q"]) == 2
    assert "nosuchgpu" in capsys.readouterr().err


def test_projected_mfu_takes_a_projection(sample_traces: Path) -> None:
    """The what-if Projection's shape (steps with name, measured_ns, projected_ns)."""
    from dataclasses import dataclass

    from kviewer.analysis.mfu import projected_mfu

    @dataclass
    class Step:
        name: str
        measured_ns: int
        projected_ns: int

    @dataclass
    class Projection:
        steps: list[Step]

    res = mfu(load(sample_traces / "gpt_infer.pt.trace.json.gz"))
    st = res.steps.to_dict(orient="records")
    df = projected_mfu(res, Projection([Step(s["name"], s["step_ns"], 1_000_000) for s in st]))
    for s, row in zip(st, df.to_dict(orient="records")):
        assert row["projected_mfu"] == pytest.approx(s["model_flops"] / (1e-3 * s["peak_flops"]), rel=1e-12)


def test_job_table_per_step_over_ranks_spelled_out() -> None:
    """The job table against the definition written row by row: the slowest rank's time (the first
    such rank on a tie), FLOPs summed (unknown only when every rank's is), the peaks summed
    (unknown when any rank's is), unknown time summed, SOL over the ranks' step time."""
    import pandas as pd

    from kviewer.analysis.mfu import job_table

    rng = np.random.default_rng(7)
    n = 300
    nan = math.nan
    steps = pd.DataFrame({
        "rank": rng.integers(0, 4, n), "step": rng.integers(0, 40, n), "step_ns": rng.integers(1, 10**9, n),
        "model_flops": np.where(rng.random(n) < 0.3, nan, rng.random(n) * 1e14),
        "hardware_flops": np.where(rng.random(n) < 0.3, nan, rng.random(n) * 1e14),
        "unknown_ns": np.where(rng.random(n) < 0.5, nan, rng.random(n) * 1e6),
        "peak_flops": np.where(rng.random(n) < 0.2, nan, 9.89e14),
        "sol_ns": np.where(rng.random(n) < 0.4, nan, rng.random(n) * 1e8),
    })
    steps.loc[steps["step"] == 3, "model_flops"] = nan  # no rank knows the step's FLOPs
    steps.loc[steps["step"] == 5, "step_ns"] = 7  # every rank ties: the first row's rank is the slowest
    got = job_table(steps).set_index("step")
    assert list(got.index) == sorted(set(steps["step"].tolist()))
    for step, rows in steps.groupby("step"):
        r = got.loc[step]
        t = int(rows["step_ns"].max())
        first = rows.index[rows["step_ns"].to_numpy() == t][0]

        def total(col: str, all_needed: bool = False) -> float:
            vals = rows[col].tolist()
            known = [v for v in vals if v == v]
            if (all_needed and len(known) < len(vals)) or not known:
                return nan
            return math.fsum(known)

        assert r["ranks"] == len(rows) and r["step_ns"] == t and r["slowest_rank"] == rows.loc[first, "rank"]
        for col, want in (("model_flops", total("model_flops")), ("hardware_flops", total("hardware_flops")),
                          ("peak_flops", total("peak_flops", all_needed=True)),
                          ("unknown_ns", math.fsum(v for v in rows["unknown_ns"] if v == v))):
            assert (math.isnan(want) and math.isnan(r[col])) or r[col] == pytest.approx(want, rel=1e-12), (step, col)
        util = mfu_for_step_time(r["model_flops"], r["peak_flops"], t)
        want_mfu = nan if util > 1.0 else util  # more than the peak is an error, shown unknown
        assert (math.isnan(want_mfu) and math.isnan(r["mfu"])) or r["mfu"] == pytest.approx(want_mfu, rel=1e-12), step
        sol = total("sol_ns")
        want_sol = sol / (t * len(rows)) if sol == sol else nan
        assert (math.isnan(want_sol) and math.isnan(r["sol_step"])) or r["sol_step"] == pytest.approx(want_sol, rel=1e-12)
    assert math.isnan(got.loc[3, "model_flops"]) and math.isnan(got.loc[3, "mfu"])
