"""python -m pnp_peer: one denoiser configuration of deepinv 0.5 under torch.compile, timed.

  python -m pnp_peer --arch drunet --dim 2 --channels 3 --shape 1,3,1024,1024 --weights W.h5 \
      --device cuda:0 --mode max-autotune --warmup 5 --timed 10 --stable 5 --sigma 0.1 --seed 0

The module is deepinv's own (deepinv.models.DRUNet / DnCNN / UNet, pretrained=None) with pnp's
weights loaded strictly from W.h5 (/weights/<deepinv key>, nn::save_weights): the same network
and the same values as pnp's arms. The protocol is pnp_bench's: the clock starts before
torch.compile, the first call (which compiles) is synchronised and gives first_call_s; the
warm-up calls follow, then the timed calls, each synchronised and timed with CUDA events;
stable_s = mean of the last --stable. compile_s = first_call_s - stable_s (torch.compile
compiles inside the first call). The input is uniform in [0, 1) (never zeros). After timing,
the compiled output is compared with the eager module's on the same input (relative L2; exit 6
when above --tolerance). Prints one JSON line; exit codes in pnp_peer/__init__.py.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

from . import EXIT_INPUT, EXIT_NO_DEEPINV, EXIT_NO_TORCH, EXIT_TORCH_VERSION, EXIT_WRONG, PEER_VERSION


def deepinv_module(dinv, arch: str, dim: int, channels: int, features: list[int], blocks: int):
    """deepinv's module for pnp's DenoiserSpec (src/nn/models.cpp builds the same structure)."""
    m = dinv.models
    if arch == "drunet":
        kw = {} if not features else {"nc": tuple(features)}
        if blocks > 0:
            kw["nb"] = blocks
        return m.DRUNet(channels, channels, pretrained=None, dim=dim, **kw)
    if arch == "dncnn":
        kw = {} if not features else {"nf": features[0]}
        if blocks > 0:
            kw["depth"] = blocks
        return m.DnCNN(channels, channels, pretrained=None, dim=dim, **kw)
    if arch == "unet":
        kw = {} if not features else {"scales": len(features), "channels_per_scale": list(features)}
        return m.UNet(channels, channels, dim=dim, **kw)
    raise ValueError(f"--arch must be drunet, dncnn or unet, got {arch!r}")


def load_weights(module, path: str, torch) -> None:
    import h5py

    with h5py.File(path, "r") as f:
        w = {k: torch.from_numpy(f["weights"][k][()]) for k in f["weights"]}
    sd = module.state_dict()
    state = {}
    for k, v in sd.items():
        if k.endswith("num_batches_tracked"):
            state[k] = v
        elif k not in w:
            raise KeyError(f"{path} has no weight {k!r} for deepinv's module")
        elif tuple(w[k].shape) != tuple(v.shape):
            raise ValueError(f"weight {k}: {tuple(w[k].shape)} in {path}, deepinv's module wants {tuple(v.shape)}")
        else:
            state[k] = w[k].to(v.dtype)
    extra = sorted(set(w) - set(sd))
    if extra:
        raise KeyError(f"{path} holds weights deepinv's module does not have: {extra[:5]}")
    module.load_state_dict(state, strict=True)


def run(a, torch, dinv) -> dict:
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float64": torch.float64}[a.dtype]
    dev = torch.device(a.device)
    shape = [int(s) for s in a.shape.split(",")]
    features = [int(s) for s in a.features.split(",")] if a.features else []
    cuda = dev.type == "cuda"
    if cuda:
        torch.cuda.set_device(dev)
        torch.empty(1, device=dev)  # initialises the allocator, as pnp_bench does
        torch.cuda.empty_cache()
        torch.cuda.synchronize(dev)
        torch.cuda.reset_peak_memory_stats(dev)

    def sync():
        if cuda:
            torch.cuda.synchronize(dev)

    def timed(f):
        sync()
        if cuda:
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            f()
            e.record()
            e.synchronize()
            return s.elapsed_time(e) * 1e-3
        t = time.perf_counter()
        f()
        return time.perf_counter() - t

    gen = torch.Generator().manual_seed(a.seed)
    x_cpu = torch.rand(shape, generator=gen)
    t0 = time.perf_counter()
    module = deepinv_module(dinv, a.arch, a.dim, a.channels, features, a.blocks)
    load_weights(module, a.weights, torch)
    module = module.to(dev, dtype).eval()
    x = x_cpu.to(dev, dtype)
    compiled = torch.compile(module, mode=a.mode)
    out = {}
    # deepinv's DRUNet makes its noise-level map with torch.ones at torch's default dtype: in
    # bf16 the map is float32, the concat promotes the input, and the convolution refuses it
    # (H200, 2026-12-03). The calls run at the module's dtype.
    default_dtype = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.no_grad():
            def call():
                out["y"] = compiled(x, a.sigma)
            call()
            sync()
            first = time.perf_counter() - t0
            for _ in range(1, a.warmup):
                call()
            t = [timed(call) for _ in range(a.timed)]
            peak = torch.cuda.max_memory_allocated(dev) if cuda else 0
            stable = sum(t[-a.stable:]) / a.stable
            y = out["y"].float()
            if not torch.isfinite(y).all():
                raise FloatingPointError("non-finite output")
            ref = module(x, a.sigma).float()
            err = float((y - ref).norm() / ref.norm().clamp_min(1e-30))
    finally:
        torch.set_default_dtype(default_dtype)
    return {"peer": PEER_VERSION, "module": f"deepinv.models.{type(module).__name__}",
            "deepinv": dinv.__version__, "torch": torch.__version__, "mode": a.mode,
            "first_call_s": first, "compile_s": max(0.0, first - stable), "stable_s": stable,
            "timed_s": t, "peak_memory_bytes": int(peak), "error_vs_eager": err,
            "cuda_graphs": bool(cuda and a.mode in ("max-autotune", "reduce-overhead"))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pnp_peer", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", required=True, choices=["drunet", "dncnn", "unet"])
    ap.add_argument("--dim", type=int, default=2, choices=[2, 3])
    ap.add_argument("--channels", type=int, required=True)
    ap.add_argument("--features", default="", help="comma-separated widths ([models.<arch>] features; empty: deepinv's)")
    ap.add_argument("--blocks", type=int, default=-1, help="[models.<arch>] blocks (-1: deepinv's)")
    ap.add_argument("--shape", required=True, help="comma-separated input shape, e.g. 1,3,512,512")
    ap.add_argument("--weights", required=True, help="pnp weights HDF5 (/weights/<deepinv key>)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float64"])
    ap.add_argument("--mode", default="default", choices=["default", "max-autotune", "reduce-overhead"])
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--timed", type=int, default=10)
    ap.add_argument("--stable", type=int, default=5)
    ap.add_argument("--sigma", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tolerance", type=float, default=2e-2,
                    help="largest relative L2 difference to the eager module (TF32 convolutions: 1e-3 typical)")
    ap.add_argument("--expect-torch", help="fail (exit 4) unless torch's version (before '+') is this")
    a = ap.parse_args(argv)
    if a.warmup < 1 or a.timed < 1 or not 1 <= a.stable <= a.timed:
        print("pnp_peer: need warmup >= 1, timed >= 1 and 1 <= stable <= timed", file=sys.stderr)
        return EXIT_INPUT
    try:
        import torch
    except Exception as e:  # noqa: BLE001
        print(f"pnp_peer: cannot import torch with {sys.executable}: {e}", file=sys.stderr)
        return EXIT_NO_TORCH
    if a.expect_torch and torch.__version__.split("+")[0] != a.expect_torch.split("+")[0]:
        print(f"pnp_peer: {sys.executable} has torch {torch.__version__}, pnp links {a.expect_torch}", file=sys.stderr)
        return EXIT_TORCH_VERSION
    try:
        import deepinv as dinv
    except Exception as e:  # noqa: BLE001
        print(f"pnp_peer: cannot import deepinv with {sys.executable}: {e}. Install it by name: "
              "python3 -m pip install deepinv==0.5.0 (or scripts/bootstrap.sh --with-deepinv)", file=sys.stderr)
        return EXIT_NO_DEEPINV
    try:
        r = run(a, torch, dinv)
    except (ValueError, KeyError, FileNotFoundError, OSError) as e:
        print(f"pnp_peer: {type(e).__name__}: {e}", file=sys.stderr)
        return EXIT_INPUT
    print(json.dumps(r))
    if r["error_vs_eager"] > a.tolerance:
        print(f"pnp_peer: the compiled module differs from the eager one by {r['error_vs_eager']:.3e} "
              f"(relative L2) > {a.tolerance}", file=sys.stderr)
        return EXIT_WRONG
    return 0


if __name__ == "__main__":
    sys.exit(main())
