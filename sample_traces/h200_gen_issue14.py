"""Traces for issue 14's checks on an H200: a depthwise conv net and a conv net training step
under torch.profiler (with_flops: key_averages' own FLOP counts beside them), and GEMMs of known
shapes in fp16 / tf32 / fp8 / bf16 for `ncu --set full`."""
import argparse, gzip, json, torch
from torch.profiler import profile, ProfilerActivity, record_function

p = argparse.ArgumentParser()
p.add_argument("--model", required=True)
p.add_argument("--out", default="")
a = p.parse_args()
torch.manual_seed(0)


def dump(prof, name):
    prof.export_chrome_trace(f"/tmp/{name}.json")
    with open(f"/tmp/{name}.json", "rb") as f, gzip.open(f"{a.out}/{name}.pt.trace.json.gz", "wb") as g:
        g.write(f.read())
    rows = [{"key": e.key, "count": e.count, "flops": int(e.flops or 0), "input_shapes": str(e.input_shapes)}
            for e in prof.key_averages(group_by_input_shape=True) if e.flops]
    tot = {e.key: {"count": e.count, "flops": int(e.flops)} for e in prof.key_averages() if e.flops}
    json.dump({"torch": torch.__version__, "iters": 2, "by_shape": rows, "by_op": tot}, open(f"{a.out}/{name}_flops.json", "w"), indent=1)


if a.model in ("mobilenet", "resnet_train"):
    import torchvision
    if a.model == "mobilenet":
        model = torchvision.models.mobilenet_v2().cuda().to(torch.bfloat16).eval()
    else:
        model = torchvision.models.resnet18().cuda().to(torch.bfloat16).train()
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(16, 3, 224, 224, device="cuda", dtype=torch.bfloat16)

    def step():
        if a.model == "mobilenet":
            with torch.no_grad():
                model(x)
        else:
            model(x).float().sum().backward()
            opt.step()
            opt.zero_grad()
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True, with_flops=True) as prof:
        for i in range(2):
            with record_function(f"step_{i}"):
                step()
        torch.cuda.synchronize()
    dump(prof, f"h200_{a.model}")  # renamed in the repo: h200_mobilenet_v2*, h200_resnet18_train*
else:  # GEMMs of known shapes, one launch each after a warm-up
    M, N, K = 4096, 2048, 1024
    A16 = torch.randn(M, K, device="cuda", dtype=torch.float16); B16 = torch.randn(K, N, device="cuda", dtype=torch.float16)
    A32 = torch.randn(M, K, device="cuda"); B32 = torch.randn(K, N, device="cuda")
    Ab = A16.bfloat16(); Bb = B16.bfloat16()
    A8 = A16.to(torch.float8_e4m3fn); B8 = B16.t().contiguous().to(torch.float8_e4m3fn).t()
    one = torch.ones((), device="cuda")
    torch.backends.cuda.matmul.allow_tf32 = True
    for _ in range(2):
        torch.mm(A16, B16); torch.mm(A32, B32); torch.mm(Ab, Bb)
        torch._scaled_mm(A8, B8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    torch.cuda.synchronize()
    print("2MNK =", 2 * M * N * K)
