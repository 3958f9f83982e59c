#!/usr/bin/env bash
# Device call 3 of 2026-12-04b (the session's last code): the full GPU check tier.
#   bash docs/measurements/2026-12-04b/call3.sh   (device machine, repository root; carry .deps)
. scripts/device_call.sh
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader
  build
  stamp "gpu_check (full)"
  timeout 420 scripts/gpu_check.sh --no-build --out /tmp/gc >/dev/null 2>&1
  echo "rc=$?"
  cp /tmp/gc/gpu_check.log "$OUT/5_gpu_check.log"
  grep -E "FAIL|passed" /tmp/gc/gpu_check.log | tail -5
  stamp done
} 2>&1 | tee -a "$OUT/0_summary.log"
