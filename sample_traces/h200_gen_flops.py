"""Profile a model with torch.profiler (with_flops) and dump the Chrome trace + key_averages FLOPs."""
import argparse, json, torch, torch.nn as nn
from torch.profiler import profile, ProfilerActivity, record_function

p = argparse.ArgumentParser()
p.add_argument("--model", choices=["block", "resnet"], required=True)
p.add_argument("--out", default=None)
p.add_argument("--flops", default=None)
p.add_argument("--plain", action="store_true")
p.add_argument("--iters", type=int, default=2)
a = p.parse_args()
torch.manual_seed(0)
if a.model == "block":
    import h200_workload as w
    model = w.build(2)
    x = torch.randn(4, 1024, 2048, device="cuda", dtype=torch.bfloat16)
else:
    import torchvision
    model = torchvision.models.resnet18().cuda().to(torch.bfloat16).eval()
    x = torch.randn(16, 3, 224, 224, device="cuda", dtype=torch.bfloat16)
with torch.no_grad():
    for _ in range(3):
        model(x)
    torch.cuda.synchronize()
    if a.plain:
        for i in range(a.iters):
            torch.cuda.nvtx.range_push(f"step_{i}")
            model(x)
            torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()
    else:
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True, with_flops=True) as prof:
            for i in range(a.iters):
                with record_function(f"step_{i}"):
                    model(x)
            torch.cuda.synchronize()
        prof.export_chrome_trace(a.out)
        rows = []
        for e in prof.key_averages(group_by_input_shape=True):
            rows.append({"key": e.key, "count": e.count, "flops": int(e.flops or 0), "input_shapes": str(e.input_shapes)})
        tot = {}
        for e in prof.key_averages():
            if e.flops:
                tot[e.key] = {"count": e.count, "flops": int(e.flops)}
        json.dump({"torch": torch.__version__, "iters": a.iters, "by_shape": rows, "by_op": tot}, open(a.flops, "w"), indent=1)
print("done", a.model)
