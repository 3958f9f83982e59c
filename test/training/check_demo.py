"""Demo quality: pnp_recon on input/demo.toml with the shipped DnCNN must beat FBP and plain
gradient descent (denoiser.architecture = "identity") with the same iteration count.
usage: check_demo.py OUTDIR DEMO.toml DEMO_FBP_PSNR PNP_RECON MPIEXEC... -n 2"""
import subprocess
import sys

import h5py
import numpy as np

outdir, demo, fbp_tool, recon = sys.argv[1:5]
mpiexec = sys.argv[5:]


def run(cmd):
    print("$", " ".join(cmd), flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stdout, r.stderr)
        raise SystemExit(f"command failed with exit code {r.returncode}")
    return r.stdout


def recon_psnr(name, *sets):
    out = f"{outdir}/demo_{name}.h5"
    args = []
    for s in sets:
        args += ["--set", s]
    run(mpiexec + [recon, demo, "--output", out, "--force", "--set", "output.progress=false"] + args)
    with h5py.File(out, "r") as f:
        psnr = f["/metrics/psnr"][()]
        cfg = f.attrs["config"]
        x = f["/reconstruction"][()]
    assert np.all(np.isfinite(psnr)), psnr
    return float(psnr[-1]), cfg, x


fbp_out = run([fbp_tool, demo])
vals = dict(line.split() for line in fbp_out.strip().splitlines())
fbp = float(vals["fbp_psnr"])
pnp, cfg, x = recon_psnr("dncnn")
cfg_norm = cfg.replace("'", '"')
assert 'architecture = "dncnn"' in cfg_norm, cfg
weights = [l for l in cfg_norm.splitlines() if l.startswith("weights = ")][0]
assert "dncnn_ct" in weights, weights
gd, gd_cfg, _ = recon_psnr("identity", "denoiser.architecture=identity", 'denoiser.weights=""')
iters = [l for l in cfg.splitlines() if l.startswith("iterations = ")][0]
assert iters in gd_cfg
print(f"demo ({iters}, denoiser {weights}):")
print(f"  FBP (clamped to the truth's range, unclamped {float(vals['fbp_psnr_unclamped']):.2f} dB): {fbp:6.2f} dB")
print(f"  gradient descent (identity denoiser):                  {gd:6.2f} dB")
print(f"  PnP with the shipped DnCNN:                            {pnp:6.2f} dB")
assert pnp > fbp, f"PnP-DnCNN {pnp:.2f} dB does not beat FBP {fbp:.2f} dB"
assert pnp > gd, f"PnP-DnCNN {pnp:.2f} dB does not beat gradient descent {gd:.2f} dB"
# The demo's SSIM against scikit-image (the 31 dB reconstruction, 2 ranks).
run([sys.executable, f"{__file__.rsplit('/', 3)[0]}/test/solver/check_ssim.py", f"{outdir}/demo_dncnn.h5"])
print("demo quality check passed")
