"""The quality table of scripts/gpu_quality.sh: for each pnp_recon output, the iteration with the
best PSNR (among those with metrics), its PSNR and SSIM, and the seconds to reach it (first
iteration, which includes setup and compile, plus the device time of the iterations after it);
the FBP row from demo_fbp_psnr's output. With --budget S, also the best iteration reached within
S seconds (the columns *_in_budget), and each run's PSNR curve (every iteration with metrics).
  quality_table.py --fbp FBP.txt --csv OUT.csv [--budget S] RUN.h5 ..."""
import argparse
import csv
import os

import h5py
import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--fbp", required=True)
ap.add_argument("--csv", required=True)
ap.add_argument("--budget", type=float, default=float("inf"))
ap.add_argument("files", nargs="+")
a = ap.parse_args()

fbp = dict(line.split() for line in open(a.fbp) if len(line.split()) == 2)
rows = [dict(method="FBP (ramp, clamped)", denoiser="-", sigma="-", setting="-", iterations=0,
             psnr=float(fbp["fbp_psnr"]), ssim=float(fbp["fbp_ssim"]), seconds=float(fbp["fbp_seconds"]),
             final_psnr=float(fbp["fbp_psnr"]), stable_iteration_s=float("nan"),
             iterations_in_budget=0, psnr_in_budget=float(fbp["fbp_psnr"]))]
curves = []
for path in a.files:
    name = os.path.basename(path).removesuffix(".h5")
    with h5py.File(path, "r") as f:
        psnr, ssim = f["/metrics/psnr"][()], f["/metrics/ssim"][()]
        total = f["/timings/total"][()].max(axis=1)
        first = float(f["/timings/first_iteration"][()])
        stable = float(f["/timings/stable_iteration"][()])
        cfg = f.attrs["config"]
    get = lambda key: next((l.split("=", 1)[1].strip().strip("'\"") for l in cfg.splitlines() if l.startswith(key + " =")), "?")
    ok = np.where(np.isfinite(psnr))[0]
    best = int(ok[np.argmax(psnr[ok])])
    # seconds to reach the end of iteration i: the first iteration plus the device time after it
    reach = first + np.concatenate([[0.0], np.cumsum(total[1:])])
    fit = ok[reach[ok] <= a.budget]
    in_budget = int(fit[np.argmax(psnr[fit])]) if len(fit) else -1
    curves.append(f"{name}: " + " ".join(f"{i + 1}:{psnr[i]:.2f}" for i in ok))
    rows.append(dict(method=name, denoiser=get("weights") or get("architecture"), sigma=get("sigma"),
                     setting=f"init {get('init')}, step_scale {get('step_scale')}, relaxation {get('relaxation')}, "
                             f"sigma_start {get('sigma_start')}",
                     iterations=best + 1, psnr=float(psnr[best]), ssim=float(ssim[best]),
                     seconds=first + float(total[1:best + 1].sum()), final_psnr=float(psnr[ok[-1]]),
                     stable_iteration_s=stable, iterations_in_budget=in_budget + 1,
                     psnr_in_budget=float(psnr[in_budget]) if in_budget >= 0 else float("nan")))
with open(a.csv, "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(rows)
print(f"{'run':36s} {'best it':>7s} {'PSNR':>8s} {'SSIM':>7s} {'seconds':>8s} {'final PSNR':>10s} {'stable it':>10s}"
      f" {'it<=budget':>10s} {'PSNR':>8s}")
for r in rows:
    print(f"{r['method']:36s} {r['iterations']:7d} {r['psnr']:8.3f} {r['ssim']:7.4f} {r['seconds']:8.2f} "
          f"{r['final_psnr']:10.3f} {r['stable_iteration_s']:10.4f} {r['iterations_in_budget']:10d} {r['psnr_in_budget']:8.3f}")
print("PSNR curves (iteration:dB)")
for c in curves:
    print(" ", c)
