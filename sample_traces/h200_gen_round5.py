"""Round-5 real data for issue #25 (run on the lent H200; see h200_round5/*.HOW.md).

Items:
  range    a Kineto trace in CUPTI *profiler-range* mode: torch.profiler's experimental config
           asks CUPTI for counters per kernel (profiler_measure_per_kernel), and Kineto writes one
           ``cuda_profiler_range`` event per kernel with the counters in its args. The workload is a
           few GEMMs (bf16 and fp32) and element-wise ops whose FLOPs and bytes are known, and torch's
           own FLOP counts (key_averages with_flops) are saved beside it as the independent check.
  sample   the same workload under a plain loop (no torch.profiler), for nsys CPU sampling with
           backtraces (``nsys profile -s cpu --backtrace=...``): the export's SAMPLING_CALLCHAINS.
"""
import argparse, json, os, time
import torch

SHAPES = [(2048, 2048, 2048), (4096, 1024, 4096)]


def work(x32, ws):
    outs = []
    for w in ws:
        y = x32.to(w.dtype) @ w           # a GEMM: 2*M*N*K FLOPs
        y = torch.nn.functional.gelu(y)   # element-wise, memory-bound
        outs.append((y + 1.0).sum())      # add + reduction
    return outs


def setup():
    torch.manual_seed(0)
    dev = "cuda"
    xs, wss = [], []
    for (m, k, n) in SHAPES:
        xs.append(torch.randn(m, k, device=dev))
        wss.append([torch.randn(k, n, device=dev, dtype=torch.bfloat16), torch.randn(k, n, device=dev, dtype=torch.float32)])
    return xs, wss


def step(xs, wss):
    for x, ws in zip(xs, wss):
        work(x, ws)


def range_mode(out, metrics, iters):
    from torch.profiler import profile, ProfilerActivity, _ExperimentalConfig
    xs, wss = setup()
    step(xs, wss); torch.cuda.synchronize()
    cfg = _ExperimentalConfig(profiler_metrics=metrics, profiler_measure_per_kernel=True)
    acts = [ProfilerActivity.CUDA] if os.environ.get("CUDA_ONLY") else [ProfilerActivity.CUDA, ProfilerActivity.CPU]
    print("supported activities:", torch.profiler.supported_activities())
    with profile(activities=acts, record_shapes=True, with_flops=True, experimental_config=cfg) as prof:
        for _ in range(iters):
            step(xs, wss)
        torch.cuda.synchronize()
    path = os.path.join(out, "range_counters.pt.trace.json")
    prof.export_chrome_trace(path)
    flops = {e.key: {"count": e.count, "flops": e.flops} for e in prof.key_averages() if e.flops}
    json.dump({"torch": torch.__version__, "cuda": torch.version.cuda, "device": torch.cuda.get_device_name(),
               "metrics": metrics, "iters": iters, "shapes": SHAPES, "key_averages_flops": flops},
              open(os.path.join(out, "range_counters_truth.json"), "w"), indent=1)
    print("wrote", path, os.path.getsize(path))


def plain(iters):
    xs, wss = setup()
    for i in range(iters):
        torch.cuda.nvtx.range_push(f"step_{i}")
        step(xs, wss)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("item", choices=["range", "plain"])
    p.add_argument("--out", default=".")
    p.add_argument("--iters", type=int, default=2)
    p.add_argument("--metrics", default="kineto__cuda_core_flops,kineto__tensor_core_insts,dram__bytes_read.sum,dram__bytes_write.sum,smsp__sass_thread_inst_executed_op_ffma_pred_on.sum,smsp__sass_thread_inst_executed_op_fadd_pred_on.sum,smsp__sass_thread_inst_executed_op_fmul_pred_on.sum")
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    if a.item == "range":
        range_mode(a.out, a.metrics.split(","), a.iters)
    else:
        plain(a.iters)
