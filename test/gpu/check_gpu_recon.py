"""Compares the pnp_recon outputs of scripts/gpu_check.sh (one directory of NAME.h5 files).
  check_gpu_recon.py --fbp FBP_PSNR --dir DIR
Checks, printing one line each and failing (exit 1) on the first that does not hold:
  - every reconstruction is non-blank: final PSNR >= FBP + 3 dB, and real spread in the image;
  - native pre, post and fused equal each other to 1e-6 and none to 1e-5 (relative L2, TF32 off,
    denoiser.memory_hold = false: every mode cuDNN's first choice of engine);
  - inductor pre, post and fused equal each other to 1e-6 and none to 1e-5;
  - the NCCL runs captured in CUDA graphs (post, fused) equal their uncaptured twins to 1e-6;
  - /communication/bytes: every iteration of a captured run equals the uncaptured run's, and
    the total is iterations x the per-iteration value (not only the first iteration and the capture).
"""
import argparse
import math
import os
import sys

import h5py
import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--fbp", type=float, required=True)
ap.add_argument("--dir", required=True)
ap.add_argument("--names", nargs="+", help="the runs to check (default: all of gpu_check.sh's)")
a = ap.parse_args()


def load(name):
    path = os.path.join(a.dir, name + ".h5")
    with h5py.File(path, "r") as f:
        x = f["/reconstruction"][()].astype(np.float64)
        gt = f["/ground_truth"][()].astype(np.float64)
        psnr = [v for v in f["/metrics/psnr"][()] if np.isfinite(v)]
        ssim = [v for v in f["/metrics/ssim"][()] if np.isfinite(v)] if "/metrics/ssim" in f else []
        b = f["/communication/bytes"][()] if "/communication/bytes" in f else None
        per_it = f["/communication/bytes_per_iteration"][()]
        captured = int(f.attrs.get("graphs_captured", 0))
    return dict(x=x, gt=gt, psnr=psnr[-1] if psnr else math.nan, ssim=ssim[-1] if ssim else math.nan, bytes=b,
                per_it=per_it, captured=captured)


failed = []


def check(ok, msg):
    print(("ok    " if ok else "FAIL  ") + msg)
    if not ok:
        failed.append(msg)


def rel(p, q):
    return float(np.linalg.norm(p - q) / np.linalg.norm(q))


names = ["none", "native_pre", "native_post", "native_fused", "inductor_pre", "inductor_post", "inductor_fused",
         "native_pre_tf32", "nccl_post", "nccl_post_uncaptured", "nccl_fused", "nccl_fused_uncaptured"]
if a.names:
    names = a.names
runs = {}
for n in names:
    try:
        runs[n] = load(n)
    except (OSError, KeyError) as e:
        check(False, f"{n}: no usable output ({e})")
for n, r in runs.items():
    spread = float(np.std(r["x"]))
    check(r["psnr"] >= a.fbp + 3.0 and spread > 0.1 * float(np.std(r["gt"])),
          f"{n}: PSNR {r['psnr']:.3f} dB, SSIM {r['ssim']:.4f} (FBP {a.fbp:.3f} dB + 3), std {spread:.4f}")
for backend in ("native", "inductor"):
    got = [m for m in ("pre", "post", "fused") if f"{backend}_{m}" in runs]
    for i, m in enumerate(got):
        x = runs[f"{backend}_{m}"]["x"]
        if "none" in runs:
            d = rel(x, runs["none"]["x"])
            check(d <= 1e-5, f"{backend} {m} vs none: relative difference {d:.2e} (<= 1e-5, TF32 off)")
        for m2 in got[i + 1:]:
            d = rel(x, runs[f"{backend}_{m2}"]["x"])
            check(d <= 1e-6, f"{backend} {m} vs {m2}: relative difference {d:.2e} (<= 1e-6)")
for m in ("post", "fused"):
    c, u = runs.get(f"nccl_{m}"), runs.get(f"nccl_{m}_uncaptured")
    if not (c and u):
        continue
    check(c["captured"] == 1 and u["captured"] == 0, f"nccl {m}: graphs captured {c['captured']}, uncaptured twin {u['captured']}")
    d = rel(c["x"], u["x"])
    check(d <= 1e-6, f"nccl {m} captured vs uncaptured: relative difference {d:.2e} (<= 1e-6)")
    bc, bu = c["bytes"], u["bytes"]
    ok = bc is not None and bu is not None and bc.shape == bu.shape and np.all(bc == bu) and np.all(bu > 0)
    check(ok, f"nccl {m}: bytes per iteration captured {None if bc is None else bc[:, 0].tolist()} vs uncaptured "
              f"{None if bu is None else bu[:, 0].tolist()}")
    if bc is not None:
        check(bool(np.all(c["per_it"] == bc.mean(axis=0))), f"nccl {m}: bytes_per_iteration {c['per_it'].tolist()} "
                                                         f"is the mean of /communication/bytes")
print(f"{len(failed)} check(s) failed" if failed else "all reconstruction checks passed")
sys.exit(1 if failed else 0)
