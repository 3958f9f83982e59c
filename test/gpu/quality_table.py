"""The quality table of scripts/gpu_quality.sh: for each pnp_recon output, the iteration with the
best PSNR (among those with metrics), its PSNR and SSIM, and the seconds to reach it (first
iteration, which includes setup and compile, plus the device time of the iterations after it);
the FBP row from demo_fbp_psnr's output.
  quality_table.py --fbp FBP.txt --csv OUT.csv RUN.h5 ..."""
import argparse
import csv
import os

import h5py
import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--fbp", required=True)
ap.add_argument("--csv", required=True)
ap.add_argument("files", nargs="+")
a = ap.parse_args()

fbp = dict(line.split() for line in open(a.fbp) if len(line.split()) == 2)
rows = [dict(method="FBP (ramp, clamped)", denoiser="-", sigma="-", setting="-", iterations=0,
             psnr=float(fbp["fbp_psnr"]), ssim=float(fbp["fbp_ssim"]), seconds=float(fbp["fbp_seconds"]),
             final_psnr=float(fbp["fbp_psnr"]), stable_iteration_s=float("nan"))]
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
    rows.append(dict(method=name, denoiser=get("weights") or get("architecture"), sigma=get("sigma"),
                     setting=f"init {get('init')}, step_scale {get('step_scale')}, relaxation {get('relaxation')}",
                     iterations=best + 1, psnr=float(psnr[best]), ssim=float(ssim[best]),
                     seconds=first + float(total[1:best + 1].sum()), final_psnr=float(psnr[ok[-1]]),
                     stable_iteration_s=stable))
with open(a.csv, "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(rows)
print(f"{'run':32s} {'best it':>7s} {'PSNR':>8s} {'SSIM':>7s} {'seconds':>8s} {'final PSNR':>10s} {'stable it':>10s}")
for r in rows:
    print(f"{r['method']:32s} {r['iterations']:7d} {r['psnr']:8.3f} {r['ssim']:7.4f} {r['seconds']:8.2f} "
          f"{r['final_psnr']:10.3f} {r['stable_iteration_s']:10.4f}")
