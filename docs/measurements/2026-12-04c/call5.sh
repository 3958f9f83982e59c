#!/usr/bin/env bash
# Device call 5 of 2026-12-04c: the GPU check tier at the session's final code, then where the
# cold compile's higher peak memory comes from (DRUNet 1 ch 4096² fp32: 22.01 GB, against
# 18.05 GB before the zero-bias graphs; 17.77 GB compiled from the plan cache).
#   bash docs/measurements/2026-12-04c/call5.sh   (device machine, repository root; carry .deps)
# - the whole build, scripts/gpu_check.sh;
# - DRUNet 1 ch 4096² fp32 cold compiles: the defaults; the plan builds serial (s); no graph
#   candidates for convolutions without a residual (G off).
. scripts/device_call.sh
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader
  build
  stamp "gpu_check"
  timeout 360 scripts/gpu_check.sh --no-build --out /tmp/gc >/tmp/gc.out 2>&1
  echo "gpu_check rc=$?"
  cp /tmp/gc/gpu_check.log "$OUT/2_gpu_check.log"
  grep -E "FAIL|passed, " /tmp/gc/gpu_check.log | tail -8
  nt 3_peak.log drunet 1 4096x4096 --native cfagbeGw
  nt 3_peak.log drunet 1 4096x4096 --native cfagbeGws
  nt 3_peak.log drunet 1 4096x4096 --native cfagbew
  stamp done
} 2>&1 | tee -a "$OUT/0_summary.log"
