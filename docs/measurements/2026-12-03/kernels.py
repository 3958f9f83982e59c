"""pnp's Hopper convolution kernels (libkdev.so, kdev.cu) against float64 and against torch's
cuDNN, on one GPU: correctness on odd shapes with the output poisoned first, then the time of
the 3 x 3 layers pnp's networks spend most of theirs in. Writes a CSV and prints a table.

    python kernels.py LIB.so OUT.csv [--quick]
"""
import ctypes
import math
import sys
import time

import torch

lib = ctypes.CDLL(sys.argv[1])
out_csv = sys.argv[2]
quick = "--quick" in sys.argv
lib.pnp_conv.restype = ctypes.c_int
lib.pnp_conv.argtypes = [ctypes.c_int] + [ctypes.c_void_p] * 5 + [ctypes.c_int] * 7

dev = torch.device("cuda")
torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True
torch.backends.cudnn.benchmark = True
cl = torch.channels_last
KERNELS = {1: "tiles", 2: "rows"}


def ptr(t):
    return ctypes.c_void_p(t.data_ptr() if t is not None else 0)


def make(n, ci, co, h, w, dtype, variant, seed):
    """x, w, b, z and the float64 reference; variant 0 plain, 1 + bias + ReLU, 2 + bias + residual."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(n, ci, h, w, generator=g).to(dev, dtype).contiguous(memory_format=cl)
    wt = (torch.randn(co, ci, 3, 3, generator=g) / math.sqrt(9 * ci)).to(dev, dtype).contiguous(memory_format=cl)
    b = (0.1 * torch.randn(co, generator=g)).to(dev, dtype) if variant > 0 else None
    z = torch.randn(n, co, h, w, generator=g).to(dev, dtype).contiguous(memory_format=cl) if variant == 2 else None
    ref = torch.nn.functional.conv2d(x.double(), wt.double(), b.double() if b is not None else None, padding=1)
    if z is not None:
        ref = ref + z.double()
    if variant == 1:
        ref = torch.relu(ref)
    return x, wt, b, z, ref


def run(kernel, x, wt, b, z, y, relu):
    n, ci, h, w = x.shape
    rc = lib.pnp_conv(kernel, ptr(x), ptr(wt), ptr(b), ptr(z), ptr(y), n, h, w, ci, wt.shape[0], int(relu),
                      int(x.dtype == torch.bfloat16))
    if rc:
        raise RuntimeError(f"kernel {kernel}: launch refused")


def cudnn(x, wt, b, z, relu):
    y = torch.nn.functional.conv2d(x, wt, b, padding=1)
    if z is not None:
        y = y + z
    return torch.relu(y) if relu else y


def rel(a, ref):
    return ((a.double() - ref).abs().max() / ref.abs().max()).item()


def time_ms(fn, reps=20):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(reps):
        fn()
    e1.record()
    torch.cuda.synchronize()
    return e0.elapsed_time(e1) / reps


rows = []
print(torch.cuda.get_device_name(), torch.__version__, "cuDNN", torch.backends.cudnn.version(), flush=True)
fails = 0
# correctness: odd sizes, partial columns, several images, both channel blocks, 64 and 128 outputs
checks = [(2, 64, 64, 13, 384), (1, 64, 64, 37, 128), (3, 64, 64, 5, 256), (1, 32, 64, 9, 512), (2, 64, 128, 7, 256),
          (1, 128, 128, 11, 640), (1, 128, 64, 6, 512), (2, 64, 64, 100, 512), (1, 64, 64, 1, 256)]
seed = 1
for dtype in (torch.float32, torch.bfloat16):
    bk = 32 if dtype == torch.float32 else 64
    for (n, ci, co, h, w) in checks:
        if ci % bk or ci > 2 * bk:
            continue
        for variant in (0, 1, 2):
            seed += 1
            x, wt, b, z, ref = make(n, ci, co, h, w, dtype, variant, seed)
            ec = rel(cudnn(x, wt, b, z, variant == 1), ref)
            for k in (1, 2):
                y = torch.full((n, co, h, w), float("nan"), device=dev, dtype=dtype).contiguous(memory_format=cl)
                run(k, x, wt, b, z, y, variant == 1)
                torch.cuda.synchronize()
                e = rel(y, ref)
                tol = 5e-3 if dtype == torch.float32 else 1.5e-2
                ok = math.isfinite(e) and e < tol and e < 2 * ec + 1e-4
                fails += not ok
                print(f"check {str(dtype)[6:]:8s} n{n} {ci}->{co} {h}x{w} variant {variant} {KERNELS[k]:5s}: "
                      f"rel err {e:.3e} (cuDNN {ec:.3e}) {'ok' if ok else 'FAIL'}", flush=True)
print(f"checks: {fails} failed", flush=True)

# timing: DnCNN's and DRUNet's full-resolution layers (64 -> 64 with bias + ReLU, and + residual),
# DRUNet bf16's 128-channel level
cases = [(1, 64, 64, 2048, 2048, torch.float32, 1), (1, 64, 64, 4096, 4096, torch.float32, 1),
         (1, 64, 64, 4096, 4096, torch.float32, 2), (1, 64, 64, 2048, 2048, torch.bfloat16, 1),
         (1, 64, 64, 4096, 4096, torch.bfloat16, 1), (1, 64, 64, 4096, 4096, torch.bfloat16, 2),
         (1, 128, 128, 2048, 2048, torch.bfloat16, 2)]
if quick:
    cases = cases[:3]
with open(out_csv, "w") as f:
    f.write("dtype,n,ci,co,h,w,variant,impl,ms,tflops,rel_err\n")
    for (n, ci, co, h, w, dtype, variant) in cases:
        seed += 1
        x, wt, b, z, ref = make(n, ci, co, h, w, dtype, variant, seed)
        flop = 2.0 * n * co * ci * 9 * h * w
        relu = variant == 1
        impls = {"cudnn": lambda: cudnn(x, wt, b, z, relu)}
        y = torch.empty((n, co, h, w), device=dev, dtype=dtype).contiguous(memory_format=cl)
        for k in (1, 2):
            impls[KERNELS[k]] = (lambda k=k: run(k, x, wt, b, z, y, relu))
        line = f"{str(dtype)[6:]:8s} {ci}->{co} {h}x{w} variant {variant}:"
        for name, fn in impls.items():
            ms = time_ms(fn)
            if name == "cudnn":
                e = rel(cudnn(x, wt, b, z, relu), ref)
            else:
                y.fill_(float("nan"))
                fn()
                torch.cuda.synchronize()
                e = rel(y, ref)
            f.write(f"{str(dtype)[6:]},{n},{ci},{co},{h},{w},{variant},{name},{ms:.4f},{flop / ms / 1e9:.1f},{e:.3e}\n")
            line += f"  {name} {ms:.3f} ms ({flop / ms / 1e9:.0f} TFLOP/s, err {e:.1e})"
        print(line, flush=True)
