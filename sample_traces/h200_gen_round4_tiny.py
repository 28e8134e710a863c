import torch
x = torch.ones(1 << 20, device="cuda")
for i in range(2):
    torch.cuda.nvtx.range_push(f"step_{i}")
    y = (x * 2).sum()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
print("tiny ok", y.item())
