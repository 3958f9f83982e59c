#!/usr/bin/env bash
# The quality table at the study's problem (4096², 100 angles, noise 0.01) on one GPU, and the
# study itself (input/study_4096.toml, drunet_ct) in every compile mode. Run after a build
# (scripts/device_build.sh or scripts/gpu_check.sh) from the repository root:
#   scripts/gpu_quality.sh [--out DIR]
# Rows: FBP (demo_fbp_psnr, clamped to the truth's range as the solver clamps), gradient
# descent (identity denoiser, FBP start, step 1.9/L), and PnP with dncnn_ct and drunet_ct from
# the FBP at two denoiser sigmas and two step/relaxation settings (the study's 0.99/L with the
# full denoiser; the demo's 1.9/L with x = 0.8 z + 0.2 D(z)), each run long enough to find its
# best iteration count (PSNR every 5 iterations). Every run is `pnp_recon` with compile.mode =
# pre (native); its output (metrics per iteration, stable iteration time) is summarised by
# test/gpu/quality_table.py into quality.csv and the log. The 4096² HDF5 outputs stay in a
# scratch directory (too large to return); the log keeps every figure.
# Stage 2 (--stage 2): the search for each denoiser's best setting within 30 s: DnCNN with
# relaxations 0.2 and 0.5 (85 iterations), DRUNet at sigma 0.05 and 0.08 (relaxation 0.5 and the
# full step) and with an annealed sigma (denoiser.sigma_start 0.15 or 0.2, within the training
# range [0, 0.2]); the table's it<=budget columns give the best iteration reached in 30 s; and
# at 1024² the annealed sigma in
# pre, post and fused with TF32 off (they must agree: the sigma buffer under capture).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
out=${OUT:-gpu_quality}
stage=1
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=$2; shift ;;
    --stage) stage=$2; shift ;;
    *) echo "error: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$out"
work=$(mktemp -d)
bin=build/gpu/bin
log="$out/quality.log"
# shellcheck source=scripts/device_env.sh
. scripts/device_env.sh
py=$PNP_PYTHON
# A fresh machine (the build of gpu_check.sh gone): build first.
[ -x $bin/pnp_recon ] && [ -x $bin/demo_fbp_psnr ] || scripts/device_build.sh >"$work/build.log" 2>&1 ||
  { tail -30 "$work/build.log"; exit 1; }
{
  echo "== $(date -u +%FT%TZ) commit ${PNP_GIT_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null)}"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  cfg=input/study_4096.toml
  $bin/demo_fbp_psnr "$cfg" cuda | tee "$work/fbp.txt"
  run() {  # name, then --set overrides
    local name=$1; shift
    echo "== $name: $*"
    mpirun --allow-run-as-root -n 1 $bin/pnp_recon "$cfg" --output "$work/$name.h5" --force \
      --set output.progress=false "$@" 2>&1 | grep -E "final PSNR|error|stable" | tail -3
  }
  if [ "$stage" = 2 ]; then
    q=(--set solver.init='"fbp"' --set solver.metrics_every=5 --set compile.mode='"pre"')
    dn=(--set denoiser.architecture='"dncnn"' --set denoiser.weights='"dncnn_ct"')
    dr=(--set denoiser.architecture='"drunet"' --set denoiser.weights='"drunet_ct"')
    relax() { echo --set solver.step_scale=1.9 --set solver.relaxation="$1"; }
    # shellcheck disable=SC2046
    {
      run dncnn_ct_r0.2_85 "${q[@]}" "${dn[@]}" --set solver.iterations=85 $(relax 0.2)
      run dncnn_ct_r0.5_85 "${q[@]}" "${dn[@]}" --set solver.iterations=85 $(relax 0.5)
      run drunet_ct_s0.05_r0.5_85 "${q[@]}" "${dr[@]}" --set denoiser.sigma=0.05 --set solver.iterations=85 $(relax 0.5)
      run drunet_ct_s0.08_r0.5_85 "${q[@]}" "${dr[@]}" --set denoiser.sigma=0.08 --set solver.iterations=85 $(relax 0.5)
      run drunet_ct_s0.05_study_60 "${q[@]}" "${dr[@]}" --set denoiser.sigma=0.05 --set solver.iterations=60
      run drunet_ct_s0.08_study_60 "${q[@]}" "${dr[@]}" --set denoiser.sigma=0.08 --set solver.iterations=60
      run drunet_ct_anneal0.15-0.02_study_60 "${q[@]}" "${dr[@]}" --set denoiser.sigma_start=0.15 \
        --set denoiser.sigma=0.02 --set solver.iterations=60
      run drunet_ct_anneal0.2-0.02_study_85 "${q[@]}" "${dr[@]}" --set denoiser.sigma_start=0.2 \
        --set denoiser.sigma=0.02 --set solver.iterations=85
      run drunet_ct_anneal0.2-0.03_r0.5_85 "${q[@]}" "${dr[@]}" --set denoiser.sigma_start=0.2 \
        --set denoiser.sigma=0.03 --set solver.iterations=85 $(relax 0.5)
    }
    $py test/gpu/quality_table.py --fbp "$work/fbp.txt" --csv "$out/quality_stage2.csv" --budget 30 "$work"/*.h5
    # The annealed sigma under capture, 1024², TF32 off: pre, post and fused must agree.
    sed -e 's/^size = 4096/size = 1024/' -e 's/^init = "zeros"/init = "fbp"/' "$cfg" >"$work/c1024.toml"
    for m in pre post fused; do
      mpirun --allow-run-as-root -n 1 $bin/pnp_recon "$work/c1024.toml" --output "$work/anneal_$m.h5" --force \
        --set output.progress=false --set compile.mode="\"$m\"" --set compile.tf32=false \
        --set denoiser.sigma_start=0.15 --set denoiser.sigma=0.02 2>&1 | grep -E "final PSNR|error"
    done
    $py - "$work" <<'EOF2'
import sys, h5py, numpy as np
d = sys.argv[1]
x = {m: h5py.File(f"{d}/anneal_{m}.h5")["/reconstruction"][()].astype(np.float64) for m in ("pre", "post", "fused")}
s = h5py.File(f"{d}/anneal_post.h5")["/metrics/sigma"][()]
for m in ("post", "fused"):
    r = np.linalg.norm(x[m] - x["pre"]) / np.linalg.norm(x["pre"])
    print(f"annealed sigma {s[0]:.3f} -> {s[-1]:.3f}: {m} vs pre relative difference {r:.2e}", "ok" if r < 1e-6 else "FAIL")
EOF2
    exit 0
  fi
  # The study as configured (zeros start, 10 iterations, step 0.99/L, drunet_ct, sigma 0.01).
  for m in none pre post fused; do run "study_$m" --set compile.mode="\"$m\"" --set solver.metrics_every=1; done
  q=(--set solver.init='"fbp"' --set solver.metrics_every=5 --set compile.mode='"pre"')
  run gd "${q[@]}" --set denoiser.architecture='"identity"' --set denoiser.weights='""' --set solver.iterations=100 \
    --set solver.step_scale=1.9
  for w in dncnn_ct drunet_ct; do
    a=drunet; [ $w = dncnn_ct ] && a=dncnn
    for s in 0.01 0.03; do
      run "${w}_s${s}_study" "${q[@]}" --set denoiser.architecture="\"$a\"" --set denoiser.weights="\"$w\"" \
        --set denoiser.sigma=$s --set solver.iterations=40
      run "${w}_s${s}_relaxed" "${q[@]}" --set denoiser.architecture="\"$a\"" --set denoiser.weights="\"$w\"" \
        --set denoiser.sigma=$s --set solver.iterations=40 --set solver.step_scale=1.9 --set solver.relaxation=0.2
    done
  done
  $py test/gpu/quality_table.py --fbp "$work/fbp.txt" --csv "$out/quality.csv" --budget 30 "$work"/*.h5
  # The study's reconstruction (pre) for the figures, downsampled to fit what comes back.
  $py - "$work/study_pre.h5" "$work/drunet_ct_s0.01_relaxed.h5" "$out/recon_small.h5" <<'EOF'
import sys, h5py
srcs, dst = sys.argv[1:-1], sys.argv[-1]
with h5py.File(dst, "w") as o:
    for s in srcs:
        with h5py.File(s, "r") as f:
            g = o.create_group(s.rsplit("/", 1)[-1].removesuffix(".h5"))
            for k in ("reconstruction", "ground_truth"):
                g[k] = f[k][::4, ::4]
                g[k + "_zoom"] = f[k][1792:2304, 1792:2304]
            for k in ("psnr", "ssim"):
                g[k] = f["metrics/" + k][()]
            for k, v in f.attrs.items():
                g.attrs[k] = v
EOF
} 2>&1 | tee "$log"
