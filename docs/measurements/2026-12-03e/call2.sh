#!/usr/bin/env bash
# Device call 2 of 2026-12-03e, part 1 of 2 (cedd8cf's tree): the build and the full GPU check
# tier (scripts/gpu_check.sh --no-build: test_native, the physics and nn tests, the native,
# NCCL and inductor runs). call2b.sh runs right after on the same machine, its build and the
# unpacked .deps kept there, carrying .whl (the tree, .deps/ and .whl/ together pass the device
# tool's 64 MiB).
#   bash docs/measurements/2026-12-03e/call2.sh   (device machine, repository root; carry .deps)
set -uo pipefail
out=${OUT:?}
t0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t0 )) s] $*"; }
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  stamp build
  timeout 300 scripts/device_build.sh >/tmp/build.log 2>&1 || { grep -E "error|Error" /tmp/build.log | head -30; tail -20 /tmp/build.log; exit 1; }
  stamp gpu_check
  timeout 280 scripts/gpu_check.sh --no-build --out /tmp/gc >/dev/null 2>&1
  echo "rc=$?"
  cp /tmp/gc/gpu_check.log "$out/1_gpu_check_full.log"
  tail -3 /tmp/gc/gpu_check.log
  stamp done
} 2>&1 | tee "$out/1_build_check.log"
