#!/usr/bin/env bash
# Device call 3 of 2026-12-03c, at HEAD (after call 2 only comments and one merged namespace in
# nhwc_ops.cpp changed in code): the build, test_native on the GPU, and the full GPU check tier.
#   bash docs/measurements/2026-12-03c/call3.sh   (device machine, repository root; carry .deps .whl)
set -uo pipefail
out=${OUT:?}
b=build/gpu/bin
t0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t0 )) s] $*"; }
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  stamp build
  timeout 300 scripts/device_build.sh >/tmp/build.log 2>&1 || { grep -E "error|Error" /tmp/build.log | head -30; tail -20 /tmp/build.log; exit 1; }
  stamp test_native
  timeout 150 $b/test_native > "$out/1_test_native.log" 2>&1
  echo "rc=$?"
  grep -E "ERROR|FAILED|test cases|assertions" "$out/1_test_native.log" | head -30
  stamp gpu_check
  timeout 330 scripts/gpu_check.sh --no-build --out /tmp/gc >/dev/null 2>&1
  echo "rc=$?"
  cp /tmp/gc/gpu_check.log "$out/2_gpu_check_full.log"
  tail -1 /tmp/gc/gpu_check.log
  stamp done
} 2>&1 | tee "$out/1_build_test.log"
