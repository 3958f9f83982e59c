#!/usr/bin/env bash
# Regenerates docs/figures from docs/results with pnp_postprocess (run from the repository root):
#   scripts/make_figures.sh [--quality] [SIDE_BY_SIDE.h5 ...]
# - peer_side_by_side_h200.{png,pdf,csv}: pnp native against deepinv under torch.compile, from the
#   float32 side-by-side files (default docs/results/side_by_side_h200_*fp32.h5; pass the files of
#   a newer `scripts/device_call.sh side_by_side` run to draw those instead, one precision at a
#   time, since the figure keys rows by architecture and shape);
# - peer_sweep_h200.{png,pdf,csv}: the same over the study's whole sweep (3 networks x 6 shapes,
#   3 channels, fp32), from docs/results/sweep_h200_*.h5;
# - scaling_study_4096_h200.{png,pdf,csv}: the scaling model (docs/results/scaling_model_*_h200.h5);
# - memory_budget.{png,pdf,csv}: the memory matrix's runs (H100 and H200), estimate and peak as shares of
#   their budgets (docs/results/memory_budget.csv);
# - with --quality, also quality_512_cpu.{png,pdf,csv}, volume_256_cpu.{png,pdf,csv} and
#   volume_3d_cpu / volume_3d_slicewise_cpu.{png,pdf,csv}
#   (docs/quality.md): their reconstructions
#   are too large for docs/results, so they are made again on this machine's CPU first (2 ranks,
#   $PNP_QUALITY_ITERATIONS iterations, default 40: about 10 min each on 2 cores), with
#   $PNP_BIN/pnp_recon (default build/cpu/bin).
set -euo pipefail
cd "$(dirname "$0")/.."
quality=0
if [ "${1:-}" = "--quality" ]; then quality=1; shift; fi
if [ $# -gt 0 ]; then side=("$@"); else side=(docs/results/side_by_side_h200_*fp32.h5); fi
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-0}   # reproducible PDFs
export PYTHONPATH=$PWD/postprocess${PYTHONPATH:+:$PYTHONPATH}
python3 -m pnp_postprocess peer-speedup "${side[@]}" --out docs/figures --name peer_side_by_side_h200
python3 -m pnp_postprocess peer-speedup docs/results/sweep_h200_*.h5 --out docs/figures --name peer_sweep_h200
python3 -m pnp_postprocess scaling docs/results/scaling_model_input_h200.h5 \
  docs/results/scaling_model_layer_h200.h5 --out docs/figures --name scaling_study_4096_h200
python3 -m pnp_postprocess memory-budget docs/results/memory_budget.csv --out docs/figures --name memory_budget
if [ "$quality" = 1 ]; then
  work=$(mktemp -d) && trap 'rm -rf "$work"' EXIT
  mkdir -p "$work/results"
  run() {
    scripts/mpirun -n 2 "${PNP_BIN:-build/cpu/bin}/pnp_recon" input/quality_4096.toml --set problem.size=512 \
      --set solver.iterations="${PNP_QUALITY_ITERATIONS:-40}" --set compile.mode='"none"' \
      --set distributed.device='"cpu"' --force "$@"
  }
  run --output "$work/results/quality_512_cpu.h5"
  run --set denoiser.architecture='"dncnn"' --set denoiser.weights='"dncnn_ct"' --set denoiser.sigma_start=0 \
    --output "$work/results/dncnn_512_cpu.h5"
  # a volume: 8 slices of 256², dncnn_ct slice by slice, 8 iterations (about 1 min)
  run --set problem.size=256 --set problem.slices=8 --set solver.iterations=8 --set denoiser.architecture='"dncnn"' \
    --set denoiser.weights='"dncnn_ct"' --set denoiser.sigma_start=0 --set solver.metrics_every=2 \
    --output "$work/results/volume_256_cpu.h5"
  out=$PWD/docs/figures
  (cd "$work" && python3 -m pnp_postprocess reconstruction results/quality_512_cpu.h5 results/dncnn_512_cpu.h5 \
    --out "$out" --name quality_512_cpu)
  (cd "$work/results" && python3 -m pnp_postprocess volume volume_256_cpu.h5 --out "$out" --name volume_256_cpu)
  # the 3D DnCNN (dncnn3d_ct) on 48 slices of 128², and the same volume slice by slice with the 2D
  # dncnn_ct (input/volume_3d.toml; a few minutes)
  vol3d() {
    scripts/mpirun -n 2 "${PNP_BIN:-build/cpu/bin}/pnp_recon" input/volume_3d.toml --set problem.slices=48 \
      --set distributed.device='"cpu"' --force "$@"
  }
  vol3d --output "$work/results/volume_3d_cpu.h5"
  vol3d --set denoiser.dim=2 --set denoiser.features=[] --set denoiser.blocks=-1 --set denoiser.weights='"dncnn_ct"' \
    --output "$work/results/volume_3d_slicewise_cpu.h5"
  for v in volume_3d_cpu volume_3d_slicewise_cpu; do
    (cd "$work/results" && python3 -m pnp_postprocess volume "$v.h5" --out "$out" --name "$v")
  done
fi
