"""Round-4 GPU truth data for kviewer (issues 24, 25, 26, 31, 32), made on one NVIDIA H200.

Sub-commands (each writes into --out):
  gemm     the decoder block of h200_workload.py (2 layers, bf16, inference) -- kineto / plain (NVTX step_N)
  mlp      a launch-bound MLP (12 x Linear(1024,1024)+GELU, batch 8, bf16): variants eager / graph / sync / nosync
  gpt      a small GPT (4 layers, d 512, 8 heads, vocab 8192, seq 512, batch 8, bf16, SDPA causal, untied lm_head)
  compile  h200_workload.py 4 layers, inference, batch (4,1024,2048): eager vs torch.compile
Modes: kineto (torch.profiler, ProfilerStep#N via prof.step(), plus unprofiled truth timing), plain (no torch
profiler, NVTX ranges step_N around each step; for nsys / ncu), memory (profile_memory + with_stack).
"""
import argparse, gzip, json, os, statistics, sys, time
import torch, torch.nn as nn, torch.nn.functional as F
from torch.profiler import profile, ProfilerActivity, schedule

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

p = argparse.ArgumentParser()
p.add_argument("what", choices=["gemm", "mlp", "gpt", "compile"])
p.add_argument("--mode", default="kineto", choices=["kineto", "plain", "memory"])
p.add_argument("--variant", default="")
p.add_argument("--out", default="/tmp/w")
p.add_argument("--iters", type=int, default=3)
p.add_argument("--profstart", action="store_true", help="plain: cudaProfilerStart/Stop around the NVTX steps")
p.add_argument("--profstep", type=int, default=-1, help="plain: cudaProfilerStart/Stop around this one step only")
a = p.parse_args()
os.makedirs(a.out, exist_ok=True)
torch.manual_seed(0)
DEV = "cuda"
BF = torch.bfloat16


def log(*x):
    print(*x, flush=True)


def timing(fn, n=30, warm=10):
    """Unprofiled step times: CUDA events around each step (no sync between steps), plus wall time per step."""
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
    t0 = time.perf_counter()
    for s, e in ev:
        s.record(); fn(); e.record()
    torch.cuda.synchronize()
    wall = (time.perf_counter() - t0) / n * 1e3
    ms = [s.elapsed_time(e) for s, e in ev]
    return {"n": n, "warmup": warm, "median_ms": statistics.median(ms), "mean_ms": statistics.mean(ms),
            "min_ms": min(ms), "max_ms": max(ms), "wall_ms_per_step": wall, "all_ms": [round(v, 5) for v in ms]}


def trace_steps(path):
    """Per-step times seen in a Kineto trace: ProfilerStep#N CPU durations, the GPU span of the work each
    step launched (through correlation ids), GPU busy time, and the first-kernel-to-first-kernel period."""
    op = gzip.open if path.endswith(".gz") else open
    with op(path, "rt") as f:
        tr = json.load(f)
    ev = [e for e in tr.get("traceEvents", []) if e.get("ph") == "X"]
    steps = sorted([e for e in ev if e.get("name", "").startswith("ProfilerStep#") and e.get("cat") in ("user_annotation", "cpu_op")],
                   key=lambda e: e["ts"])
    gpu_annot = {e["name"]: e["dur"] for e in ev if e.get("name", "").startswith("ProfilerStep#") and e.get("cat") == "gpu_user_annotation"}
    launches = [e for e in ev if e.get("cat") in ("cuda_runtime", "cuda_driver")]
    gpu = {}
    for e in ev:
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            c = (e.get("args") or {}).get("correlation")
            gpu.setdefault(c, []).append(e)
    out = []
    for s in steps:
        t0, t1 = s["ts"], s["ts"] + s["dur"]
        work = []
        for l in launches:
            if t0 <= l["ts"] <= t1:
                work += gpu.get((l.get("args") or {}).get("correlation"), [])
        row = {"name": s["name"], "cpu_dur_us": s["dur"], "gpu_annotation_dur_us": gpu_annot.get(s["name"]),
               "kernels": sum(1 for w in work if w.get("cat") == "kernel"), "gpu_ops": len(work)}
        if work:
            st = min(w["ts"] for w in work); en = max(w["ts"] + w["dur"] for w in work)
            row.update(gpu_first_ts=st, gpu_span_us=round(en - st, 3), gpu_busy_us=round(sum(w["dur"] for w in work), 3))
        out.append(row)
    for i in range(len(out) - 1):
        if "gpu_first_ts" in out[i] and "gpu_first_ts" in out[i + 1]:
            out[i]["gpu_period_to_next_us"] = round(out[i + 1]["gpu_first_ts"] - out[i]["gpu_first_ts"], 3)
    return out


def kineto(name, step_fn, n_active=3, record_shapes=True, with_flops=True, memory=False, stack=False, extra=None):
    """Warm-up (done by the caller), then wait 1, warmup 1, active n_active; prof.step() each iteration."""
    path = f"{a.out}/{name}.pt.trace.json"
    res = {}

    def ready(pr):
        pr.export_chrome_trace(path)
        res["by_op"] = {e.key: {"count": e.count, "flops": int(e.flops or 0), "cuda_time_total_us": getattr(e, "device_time_total", 0)}
                        for e in pr.key_averages()}
        res["by_shape"] = [{"key": e.key, "count": e.count, "flops": int(e.flops or 0), "input_shapes": str(e.input_shapes)}
                           for e in pr.key_averages(group_by_input_shape=True) if e.flops]
    sched = schedule(wait=1, warmup=1, active=n_active, repeat=1)
    t_loop = []
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], schedule=sched, on_trace_ready=ready,
                 record_shapes=record_shapes, with_flops=with_flops, profile_memory=memory, with_stack=stack) as prof:
        for i in range(2 + n_active):
            t0 = time.perf_counter()
            step_fn()
            prof.step()
            t_loop.append((time.perf_counter() - t0) * 1e3)
        torch.cuda.synchronize()
    with open(path, "rb") as f, gzip.open(path + ".gz", "wb", compresslevel=9) as g:
        g.write(f.read())
    os.remove(path)
    res["steps"] = trace_steps(path + ".gz")
    res["loop_wall_ms_incl_profiler"] = [round(v, 4) for v in t_loop]
    log(name, "steps:", json.dumps(res["steps"]))
    return res


def plain(step_fn, iters):
    """No torch profiler: NVTX range step_N around each step (for nsys / ncu)."""
    if a.profstart:
        torch.cuda.profiler.start()
    wall = []
    for i in range(iters):
        if i == a.profstep:
            torch.cuda.synchronize(); torch.cuda.profiler.start()
        t0 = time.perf_counter()
        torch.cuda.nvtx.range_push(f"step_{i}")
        step_fn()
        torch.cuda.nvtx.range_pop()
        if i == a.profstep:
            torch.cuda.synchronize(); torch.cuda.profiler.stop()
        wall.append((time.perf_counter() - t0) * 1e3)
    torch.cuda.synchronize()
    if a.profstart:
        torch.cuda.profiler.stop()
    log("plain wall ms per step (host, no sync):", [round(v, 3) for v in wall])


def dumpj(name, obj):
    obj.setdefault("env", {"torch": torch.__version__, "cuda": torch.version.cuda, "device": torch.cuda.get_device_name(),
                           "sm_count": torch.cuda.get_device_properties(0).multi_processor_count,
                           "cudnn": torch.backends.cudnn.version()})
    with open(f"{a.out}/{name}", "w") as f:
        json.dump(obj, f, indent=1)


def linear_params(model):
    rows = {n: {"in": m.in_features, "out": m.out_features, "weight_params": m.weight.numel(),
                "bias_params": (m.bias.numel() if m.bias is not None else 0)} for n, m in model.named_modules() if isinstance(m, nn.Linear)}
    return rows, sum(r["weight_params"] for r in rows.values())


# ---------------------------------------------------------------------------------------------------------------
if a.what == "gemm":
    import h200_workload as W
    model = W.build(2)
    x = torch.randn(4, 1024, 2048, device=DEV, dtype=BF)
    step = lambda: W.step(model, x)
    with torch.no_grad():
        for _ in range(3):
            step()
        torch.cuda.synchronize()
        if a.mode == "plain":
            plain(step, a.iters)
        else:
            truth = timing(step, n=30, warm=5)
            res = kineto("gemm_grid_block2_eager", step, n_active=3)
            lp, tot = linear_params(model)
            dumpj("truth.json", {"what": "h200_workload.py Block x2, bf16, inference (no_grad), x (4,1024,2048)",
                                 "unprofiled": truth, "profiled_steps": res["steps"], "loop_wall_ms_incl_profiler": res["loop_wall_ms_incl_profiler"],
                                 "linears": lp, "matmul_params": tot, "tokens_per_step": 4 * 1024,
                                 "flops_by_op": {k: v for k, v in res["by_op"].items() if v["flops"]}, "flops_by_shape": res["by_shape"]})

elif a.what == "mlp":
    D, L, B = 1024, 12, 8
    layers = []
    for _ in range(L):
        layers += [nn.Linear(D, D), nn.GELU()]
    model = nn.Sequential(*layers).to(DEV, BF)
    src = torch.randn(B, D, device=DEV, dtype=BF)
    xb = torch.empty_like(src)
    half = L  # first 6 (Linear, GELU) pairs
    sink = []

    def eager_step():
        xb.copy_(src)
        return model(xb)

    def sync_step(sync):
        xb.copy_(src)
        h = model[:half](xb)
        s = h.float().abs().mean()
        if sync:
            sink.append(s.item())        # host sync mid-step
            sink.clear()
        return model[half:](h)

    g = None
    torch.set_grad_enabled(False)
    for _ in range(5):
        eager_step()
    torch.cuda.synchronize()

    def make_graph():
        st = torch.cuda.Stream(); st.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(st):
            for _ in range(3):
                eager_step()
        torch.cuda.current_stream().wait_stream(st)
        gr = torch.cuda.CUDAGraph()
        with torch.cuda.graph(gr):
            eager_step()
        torch.cuda.synchronize()
        return gr
    variants = a.variant.split(",")
    if a.mode == "plain":
        v = variants[0]
        if v == "graph":
            g = make_graph()
            fn = g.replay
        elif v in ("sync", "nosync"):
            fn = lambda: sync_step(v == "sync")
        else:
            fn = eager_step
        for _ in range(5):
            fn()
        torch.cuda.synchronize()
        plain(fn, a.iters)
    else:
        out = {"model": f"{L} x (Linear({D},{D}) + GELU), batch {B}, bf16, inference (no_grad); each step copies a fixed input into a static buffer first",
               "sync_step": "sync/nosync: first 6 (Linear+GELU), s = h.float().abs().mean(), [sync: s.item()], last 6 (Linear+GELU)",
               "order": "phase 1: unprofiled timing of every variant; phase 2: torch.profiler of every variant; phase 3: unprofiled timing again (after the profiler ran in this process)"}
        fns = {}
        for v in variants:
            if v == "graph":
                fns[v] = make_graph().replay
            elif v in ("sync", "nosync"):
                fns[v] = (lambda sync: (lambda: sync_step(sync)))(v == "sync")
            else:
                fns[v] = eager_step
        for v in variants:
            out[v] = {"unprofiled": timing(fns[v], n=50, warm=10)}
            log(v, "median ms", out[v]["unprofiled"]["median_ms"], "wall", out[v]["unprofiled"]["wall_ms_per_step"])
        for v in variants:
            res = kineto(f"mlp_{v}", fns[v], n_active=4, with_flops=False)
            out[v].update(profiled_steps=res["steps"], loop_wall_ms_incl_profiler=res["loop_wall_ms_incl_profiler"])
        for v in variants:
            out[v]["unprofiled_after_profiler"] = timing(fns[v], n=50, warm=10)
            log(v, "after profiler: median ms", out[v]["unprofiled_after_profiler"]["median_ms"])
        dumpj(f"truth_{'_'.join(variants)}.json", out)

elif a.what == "gpt":
    V, T, Dm, H, NL, B = 8192, 512, 512, 8, 4, 8

    class Blk(nn.Module):
        def __init__(s):
            super().__init__()
            s.ln1 = nn.LayerNorm(Dm); s.qkv = nn.Linear(Dm, 3 * Dm, bias=False); s.proj = nn.Linear(Dm, Dm, bias=False)
            s.ln2 = nn.LayerNorm(Dm); s.fc1 = nn.Linear(Dm, 4 * Dm, bias=False); s.fc2 = nn.Linear(4 * Dm, Dm, bias=False)

        def forward(s, x):
            b, t, d = x.shape
            q, k, v = s.qkv(s.ln1(x)).split(d, dim=-1)
            q, k, v = (z.view(b, t, H, d // H).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
            x = x + s.proj(y)
            return x + s.fc2(F.gelu(s.fc1(s.ln2(x))))

    class GPT(nn.Module):
        def __init__(s):
            super().__init__()
            s.tok = nn.Embedding(V, Dm); s.pos = nn.Embedding(T, Dm)
            s.blocks = nn.Sequential(*[Blk() for _ in range(NL)]); s.ln_f = nn.LayerNorm(Dm)
            s.lm_head = nn.Linear(Dm, V, bias=False)   # untied

        def forward(s, idx):
            x = s.tok(idx) + s.pos(torch.arange(idx.shape[1], device=idx.device))
            return s.lm_head(s.ln_f(s.blocks(x)))

    model = GPT().to(DEV, BF)
    idx = torch.randint(0, V, (B, T), device=DEV); tgt = torch.randint(0, V, (B, T), device=DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def train_step():
        logits = model(idx)
        loss = F.cross_entropy(logits.float().view(-1, V), tgt.view(-1))
        loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)

    def infer_step():
        with torch.no_grad():
            return model(idx)
    lp, tot = linear_params(model)
    cfg = {"n_layer": NL, "d_model": Dm, "n_head": H, "head_dim": Dm // H, "d_ff": 4 * Dm, "vocab": V, "seq": T, "batch": B,
           "dtype": "bf16 parameters and activations (model.to(bfloat16)), loss in fp32", "attention": "F.scaled_dot_product_attention(is_causal=True)",
           "lm_head": "untied (separate nn.Linear(512, 8192, bias=False))", "linear_bias": False, "layernorm": "nn.LayerNorm (with bias)",
           "optimizer": "torch.optim.AdamW(lr=1e-4), default (foreach) implementation", "positional": "learned nn.Embedding(512, 512)"}
    common = {"config": cfg, "tokens_per_step": B * T, "linears": lp, "matmul_params": tot,
              "total_params": sum(q.numel() for q in model.parameters()),
              "matmul_flops_fwd_2NT": 2 * tot * B * T, "matmul_flops_train_6NT": 6 * tot * B * T,
              "attn_flops_fwd_full_4BT2d_per_layer_x_L": 4 * B * T * T * Dm * NL}
    if a.mode == "plain":
        fn = train_step if a.variant != "infer" else infer_step
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        plain(fn, a.iters)
        m = {k: getattr(torch.cuda, k)() for k in ("max_memory_allocated", "max_memory_reserved", "memory_allocated", "memory_reserved")}
        log("memory:", m)
    elif a.mode == "memory":
        for _ in range(3):
            train_step()
        torch.cuda.synchronize()
        before = {k: getattr(torch.cuda, k)() for k in ("max_memory_allocated", "max_memory_reserved", "memory_allocated", "memory_reserved")}
        torch.cuda.reset_peak_memory_stats()
        res = kineto("gpt_train_memory", train_step, n_active=3, record_shapes=True, with_flops=False, memory=True, stack=True)
        after = {k: getattr(torch.cuda, k)() for k in ("max_memory_allocated", "max_memory_reserved", "memory_allocated", "memory_reserved")}
        ms = torch.cuda.memory_stats()
        dumpj("memory.json", {**common, "what": "gpt train steps (fwd+bwd+AdamW), profile_memory + with_stack + record_shapes; wait 1, warmup 1, active 3",
                              "after_3_warmup_steps_before_profiling": before,
                              "note": "torch.cuda.reset_peak_memory_stats() was called after the warm-up steps, so 'at_end' max_* are peaks over the 5 profiler steps only",
                              "at_end": after, "memory_stats_subset": {k: v for k, v in ms.items() if k.startswith(("allocated_bytes.all", "reserved_bytes.all", "active_bytes.all", "num_alloc_retries", "num_ooms"))},
                              "profiled_steps": res["steps"]})
    else:
        fns = {"train": train_step, "infer": infer_step}
        tr = {}
        for v, fn in fns.items():           # phase 1: unprofiled timing of both, before any profiler ran in this process
            for _ in range(3):
                fn()
            torch.cuda.synchronize()
            tr[v] = timing(fn, n=30, warm=5)
            log(v, "median ms", tr[v]["median_ms"])
        res = {v: kineto(f"gpt_{v}", fn, n_active=3, record_shapes=True, with_flops=True) for v, fn in fns.items()}
        for v, fn in fns.items():
            after = timing(fn, n=30, warm=5)
            log(v, "after profiler: median ms", after["median_ms"])
            dumpj(f"gpt_{v}.json", {**common, "what": f"gpt {v} step" + (" (forward, cross-entropy in fp32, backward, AdamW step, zero_grad)" if v == "train" else " (forward under no_grad, logits)"),
                                    "profiler": "torch.profiler, record_shapes + with_flops, schedule(wait=1, warmup=1, active=3), prof.step() each step",
                                    "order": "phase 1: unprofiled timing of train then infer; phase 2: profiler on train then infer; phase 3: unprofiled timing again",
                                    "unprofiled": tr[v], "unprofiled_after_profiler": after,
                                    "profiled_steps": res[v]["steps"], "loop_wall_ms_incl_profiler": res[v]["loop_wall_ms_incl_profiler"],
                                    "flops_by_op": {k: v2 for k, v2 in res[v]["by_op"].items() if v2["flops"]}, "flops_by_shape": res[v]["by_shape"],
                                    "flops_note": "torch key_averages() FLOPs cover the 3 ACTIVE steps together (divide by 3 for one step)"})

elif a.what == "compile":
    import h200_workload as W
    model = W.build(4)
    x = torch.randn(4, 1024, 2048, device=DEV, dtype=BF)
    out = {"model": "h200_workload.py build(4): 4 decoder blocks d 2048, 16 heads, ff 8192, bf16, inference (no_grad), x (4,1024,2048)"}
    torch.set_grad_enabled(False)
    out["order"] = "phase 1: unprofiled timing of each variant (compiled: after compiling); phase 2: profiler on each; phase 3: unprofiled timing again"
    variants = a.variant.split(",")
    fns = {}
    for v in variants:
        fns[v] = torch.compile(model) if v == "compiled" else model
        t0 = time.perf_counter()
        for _ in range(3):
            fns[v](x)
        torch.cuda.synchronize()
        out[v] = {"first_3_calls_s_incl_compile": time.perf_counter() - t0}
        out[v]["unprofiled"] = timing(lambda: fns[v](x), n=30, warm=5)
        log(v, "median ms", out[v]["unprofiled"]["median_ms"])
    for v in variants:
        res = kineto(f"block4_{v}", lambda: fns[v](x), n_active=3, record_shapes=True, with_flops=False)
        out[v].update(profiled_steps=res["steps"], loop_wall_ms_incl_profiler=res["loop_wall_ms_incl_profiler"])
    for v in variants:
        out[v]["unprofiled_after_profiler"] = timing(lambda: fns[v](x), n=30, warm=5)
        log(v, "after profiler: median ms", out[v]["unprofiled_after_profiler"]["median_ms"])
    dumpj("truth.json", out)
log("done", a.what, a.mode, a.variant)
