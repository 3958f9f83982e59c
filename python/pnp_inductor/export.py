"""IR JSON (+ HDF5 weights) -> torch.export -> AOTInductor .pt2 package, for one fixed shape.

    python -m pnp_inductor --ir g.json [--weights w.h5] --shape 1,3,64,64 --dtype float32 \
        --device cpu|cuda[:i] --mode max-autotune|default --out model.pt2 [--expect-torch 2.11.0]
    python -m pnp_inductor --probe          # prints torch / CUDA versions as JSON

Exit codes: 0 ok, 2 bad input, 3 torch not importable, 4 torch version differs from the
expected one (the LibTorch the C++ side links), 1 anything else. The package is written to a
temporary file next to --out and renamed into place, so --out is either absent or complete.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

EXIT_INPUT, EXIT_NO_TORCH, EXIT_TORCH_VERSION = 2, 3, 4


def inductor_configs(mode: str, ir_hash: str, shape: list[int], dtype: str, inputs: str) -> dict:
    cfg: dict = {
        # Weights stay outside the compiled code: the loader feeds them (load_constants), so one
        # package serves any weights of the same IR.
        "aot_inductor.package_constants_in_so": False,
        # ... all of them: small ones (biases, BN statistics) too, which are inlined otherwise.
        "always_keep_tensor_constants": True,
        "aot_inductor.metadata": {
            "pnp.ir_hash": ir_hash,
            "pnp.shape": ",".join(str(s) for s in shape),
            "pnp.dtype": dtype,
            "pnp.inputs": inputs,
            "pnp.mode": mode,
        },
    }
    if mode == "max-autotune":
        # torch.compile(mode="max-autotune") minus its CUDA graphs (pnp captures the region
        # itself). Convolutions: ATen only -- torch 2.11's Triton conv templates with
        # num_warps=8 give wrong results.
        cfg.update({"max_autotune": True, "coordinate_descent_tuning": True,
                    "max_autotune_conv_backends": "ATEN"})
    elif mode != "default":
        raise ValueError(f"--mode must be max-autotune or default, got {mode!r}")
    return cfg


def _version_base(v: str) -> str:
    return v.split("+")[0]


def probe() -> dict:
    import torch

    return {"torch": torch.__version__, "cuda": torch.version.cuda or "none",
            "cuda_available": bool(torch.cuda.is_available()), "python": sys.version.split()[0]}


def export_package(ir_path: str, shape: list[int], out: str, *, weights: str | None = None, dtype: str = "float32",
                   device: str = "cpu", mode: str = "max-autotune") -> dict:
    import torch

    from . import EXPORTER_VERSION
    from .builder import build_module, load_ir, load_weights

    ir = load_ir(ir_path)
    tdtype = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16}[dtype]
    w = None
    if weights:
        try:
            w = load_weights(weights, ir)
        except ImportError:  # no h5py: the values do not matter, the loader feeds the real ones
            print("pnp_inductor: h5py not available; tracing with placeholder weights", file=sys.stderr)
    dev = torch.device(device)
    m = build_module(ir, w, tdtype).to(dev)
    x = torch.randn(shape, dtype=tdtype, device=dev)
    args: tuple = (x,)
    if ir["uses_sigma"]:
        args = (x, torch.tensor(0.05, dtype=tdtype, device=dev))
    t0 = time.perf_counter()
    with torch.no_grad():
        ep = torch.export.export(m, args, strict=False)
    t1 = time.perf_counter()
    cfg = inductor_configs(mode, ir.get("hash", ""), shape, dtype, "x,sigma" if ir["uses_sigma"] else "x")
    cfg["aot_inductor.metadata"]["pnp.exporter"] = EXPORTER_VERSION
    cfg["aot_inductor.metadata"]["pnp.torch"] = torch.__version__
    tmp = f"{out}.tmp.{os.getpid()}.pt2"
    try:
        torch._inductor.aoti_compile_and_package(ep, package_path=tmp, inductor_configs=cfg)
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    t2 = time.perf_counter()
    return {"package": out, "export_seconds": t1 - t0, "compile_seconds": t2 - t1, "torch": torch.__version__,
            "mode": mode, "shape": shape, "ir_hash": ir.get("hash", "")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pnp_inductor", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--probe", action="store_true", help="print torch/CUDA versions as JSON and exit")
    ap.add_argument("--ir")
    ap.add_argument("--weights")
    ap.add_argument("--shape", help="comma-separated input shape, e.g. 1,3,64,64")
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64", "bfloat16"])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--mode", default="max-autotune", choices=["max-autotune", "default"])
    ap.add_argument("--out")
    ap.add_argument("--expect-torch", help="fail (exit 4) unless torch's version (before '+') is this")
    a = ap.parse_args(argv)
    try:
        import torch
    except Exception as e:  # noqa: BLE001
        print(f"pnp_inductor: cannot import torch with {sys.executable}: {e}. Install the torch wheel "
              "matching pnp's LibTorch (python3 -m pip install torch==2.11.0) or set PNP_PYTHON.", file=sys.stderr)
        return EXIT_NO_TORCH
    if a.expect_torch and _version_base(torch.__version__) != _version_base(a.expect_torch):
        print(f"pnp_inductor: {sys.executable} has torch {torch.__version__}, but pnp links LibTorch "
              f"{a.expect_torch}; AOTInductor packages need the same version (set PNP_PYTHON).", file=sys.stderr)
        return EXIT_TORCH_VERSION
    if a.probe:
        print(json.dumps(probe()))
        return 0
    if not (a.ir and a.shape and a.out):
        print("pnp_inductor: --ir, --shape and --out are required", file=sys.stderr)
        return EXIT_INPUT
    try:
        shape = [int(s) for s in a.shape.split(",")]
    except ValueError:
        print(f"pnp_inductor: bad --shape {a.shape!r}", file=sys.stderr)
        return EXIT_INPUT
    try:
        r = export_package(a.ir, shape, a.out, weights=a.weights, dtype=a.dtype, device=a.device, mode=a.mode)
    except (ValueError, KeyError, FileNotFoundError) as e:
        print(f"pnp_inductor: {type(e).__name__}: {e}", file=sys.stderr)
        return EXIT_INPUT
    print(json.dumps(r))
    return 0
