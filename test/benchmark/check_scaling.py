"""pnp_bench --scaling on a small pnp_recon configuration (CPU), its output checked: every
dataset documented by units and description; the 1-rank rows of both halo modes the same
measurement (the same graph); the layer halo without repeated work and the input halo with it;
the modelled allreduce and halo times recomputed here from the link model and the counts; the
iteration the sum of its parts; the efficiency T(1) / (R T(R)).
usage: check_scaling.py PNP_BENCH RECON.toml WORKDIR"""
import subprocess
import sys

import h5py
import numpy as np

bench, config, work = sys.argv[1:4]
out = f"{work}/scaling_small.h5"
cmd = [bench, "--scaling", config, "--ranks", "2,4", "--gpus-per-node", "2", "--timed", "3",
       "--set", "problem.size=64", "--output", out, "--force"]
print(" ".join(cmd), flush=True)
subprocess.run(cmd, check=True)

with h5py.File(out, "r") as f:
    s = f["/scaling"]
    for name, d in s.items():
        assert "units" in d.attrs and d.attrs["description"], name
    col = {k: s[k][()] for k in s}
    text = {k: [v.decode() if isinstance(v, bytes) else v for v in col[k]]
            for k in ("layout", "halo_mode", "status", "tile")}
    link = dict(s.attrs)
    cfg = f.attrs["config"]
assert link["gpus_per_node"] == 2
n = len(col["ranks"])
rows = [{**{c: col[c][i] for c in col}, **{c: text[c][i] for c in text}} for i in range(n)]
ok = [r for r in rows if r["status"] == "ok"]
assert {(r["ranks"], r["halo_mode"]) for r in ok} >= {(1, "input"), (2, "input"), (4, "input"), (1, "layer"),
                                                      (2, "layer"), (4, "layer")}, rows
one = {r["halo_mode"]: r for r in ok if r["ranks"] == 1}
assert one["input"]["denoise_s"] == one["layer"]["denoise_s"], "1-rank layer and input: the same graph"
for r in ok:
    assert r["denoise_s"] > 0 and r["gradient_s"] > 0
    assert r["denoiser_bytes"] == 0, r  # no device memory statistics on the CPU
    parts = r["gradient_s"] + r["denoise_s"] + r["allreduce_s"] + r["halo_s"]
    assert abs(r["iteration_s"] - parts) <= 1e-12 * parts
    R = int(r["ranks"])
    assert abs(r["efficiency"] - one[r["halo_mode"]]["iteration_s"] / (R * r["iteration_s"])) < 1e-9
    if R == 1:
        assert r["allreduce_s"] == 0 and r["halo_s"] == 0 and r["halo_messages"] == 0
        continue
    intra = R <= link["gpus_per_node"]
    alpha = (link["intra_latency_us"] if intra else link["inter_latency_us"]) * 1e-6
    beta = (link["intra_gb_per_s"] if intra else link["inter_gb_per_s"]) * 1e9
    assert r["halo_messages"] > 0 and r["halo_s"] > alpha
    if r["halo_mode"] == "layer":
        assert abs(r["redundancy"] - 1) < 1e-12, r   # 64 px: 8 blocks of 8 px share out evenly
    else:
        assert r["redundancy"] > 1.2, r               # the receptive-radius halo repeats work
    # the ring allreduce of the [angles, detector] float32 sinogram: whole detector bins
    angles = int([l for l in cfg.splitlines() if l.startswith("angles")][0].split("=")[1])
    ring = 2 * (R - 1) / R
    bytes_ = (r["allreduce_s"] - 2 * (R - 1) * alpha) * beta / ring
    assert bytes_ > 0 and abs(bytes_ / (4 * angles) - round(bytes_ / (4 * angles))) < 1e-6, bytes_
print(f"{len(ok)} scaling rows checked")
