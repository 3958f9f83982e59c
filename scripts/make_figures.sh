#!/usr/bin/env bash
# Regenerates docs/figures from docs/results with pnp_postprocess (run from the repository root):
#   scripts/make_figures.sh [SIDE_BY_SIDE.h5 ...]
# - peer_side_by_side_h200.{png,pdf,csv}: pnp native against deepinv under torch.compile, from the
#   float32 side-by-side files (default docs/results/side_by_side_h200_*fp32.h5; pass the files of
#   a newer `scripts/device_call.sh side_by_side` run to draw those instead: one precision at a
#   time, since the figure keys rows by architecture and shape);
# - scaling_study_4096_h200.{png,pdf,csv}: the scaling model (docs/results/scaling_model_*_h200.h5).
# docs/figures/quality_512_cpu.* is drawn by scripts/make_quality_figure.sh (two CPU reconstructions).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -gt 0 ]; then side=("$@"); else side=(docs/results/side_by_side_h200_*fp32.h5); fi
export PYTHONPATH=postprocess${PYTHONPATH:+:$PYTHONPATH}
python3 -m pnp_postprocess peer-speedup "${side[@]}" --out docs/figures --name peer_side_by_side_h200
python3 -m pnp_postprocess scaling docs/results/scaling_model_input_h200.h5 \
  docs/results/scaling_model_layer_h200.h5 --out docs/figures --name scaling_study_4096_h200
