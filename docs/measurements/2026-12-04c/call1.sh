#!/usr/bin/env bash
# Device call 1 of 2026-12-04c: cuDNN's convolution with the residual in its output (beta = 1).
#   bash docs/measurements/2026-12-04c/call1.sh   (device machine, repository root)
# - beta_probe.cu built against the venv's cuDNN, then run: DRUNet's four 3×3 layer shapes at
#   4096² (64 ch at 4096² … 512 ch at 512²), fp32 (TF32) and bf16, cuDNN's three fastest
#   algorithms by its own Find: beta 0, beta 1 (the residual already in y), conv then an add,
#   cudnnConvolutionBiasActivationForward with z = y (identity, and ReLU);
# - the same once more, each variant once, under Nsight Compute for the kernels' names.
set -uo pipefail
: "${OUT:?set OUT}"
site=$(/opt/torch/.venv/bin/python -c 'import nvidia.cudnn, os; print(os.path.dirname(nvidia.cudnn.__file__))' 2>/dev/null)
[ -d "$site/include" ] || site=$(ls -d /opt/torch/.venv/lib/python3*/site-packages/nvidia/cudnn | head -1)
d=docs/measurements/2026-12-04c
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader
  echo "cuDNN from $site"
  nvcc -O2 -std=c++17 -arch=sm_90 -I"$site/include" $d/beta_probe.cu -L"$site/lib" -l:libcudnn.so.9 \
    -Xlinker -rpath="$site/lib" -o /tmp/beta_probe 2>&1 | grep -v -i deprecat | grep -E "error" ; echo "build done"
  timeout 240 /tmp/beta_probe
  echo "rc=$?"
} 2>&1 | tee "$OUT/1_probe.log"
timeout 240 ncu --clock-control none --metrics gpu__time_duration.sum --csv /tmp/beta_probe once >"$OUT/2_ncu_names.csv" 2>"$OUT/2_ncu.err"
echo "ncu rc=$?"
