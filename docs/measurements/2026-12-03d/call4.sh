#!/usr/bin/env bash
# Device call 4 of 2026-12-03d: Nsight Compute on the rows kernel's first launches in DRUNet
# 1 ch 1024² fp32 (the warm-up times it on the 64-channel layouts with and without a residual),
# to see where the residual's time goes: speed of light, memory workload, warp states.
#   bash docs/measurements/2026-12-03d/call4.sh   (device machine, repository root; carry .deps .whl)
set -uo pipefail
out=${OUT:?}
t0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t0 )) s] $*"; }
{
  stamp build
  timeout 200 scripts/device_build.sh nn_time >/tmp/build.log 2>&1 || { tail -20 /tmp/build.log; exit 1; }
  ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  stamp "ncu: $ncu"
  timeout 150 "$ncu" --clock-control none --kernel-name regex:wgmma_rows_kernel --launch-count 4 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section LaunchStats \
    build/gpu/bin/nn_time drunet 1 1024x1024 --device cuda --backends native --timed 5 > "$out/ncu.txt" 2>&1
  echo "rc=$?"
  grep -E "wgmma_rows_kernel|Duration|DRAM Throughput|Memory Throughput|Compute \(SM\)|L2 Hit|Stall|Warp Cycles Per Issued" "$out/ncu.txt" | head -60
  stamp done
} 2>&1 | tee "$out/call4.log"
