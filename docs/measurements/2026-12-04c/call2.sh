#!/usr/bin/env bash
# Device call 2 of 2026-12-04c: which cuDNN graph of conv + residual add reaches the precompiled
# kernel that call 1's cudnnConvolutionBiasActivationForward ran (graph_probe.cpp).
#   bash docs/measurements/2026-12-04c/call2.sh   (device machine, repository root; carry .deps)
set -uo pipefail
: "${OUT:?set OUT}"
. scripts/device_env.sh
site=$(ls -d /opt/torch/.venv/lib/python3*/site-packages/nvidia/cudnn | head -1)
d=docs/measurements/2026-12-04c
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader
  g++ -O2 -std=c++20 -w -I"$CUDNN_FRONTEND_INCLUDE" -I"$site/include" -I/usr/local/cuda/include $d/graph_probe.cpp \
    -L"$site/lib" -l:libcudnn.so.9 -L/usr/local/cuda/lib64 -lcudart -lnvrtc -Wl,-rpath,"$site/lib" -o /tmp/graph_probe || exit 1
  echo "built"
  timeout 400 /tmp/graph_probe
  echo "rc=$?"
} 2>&1 | tee "$OUT/1_graph_probe.log"
