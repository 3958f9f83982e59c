#!/usr/bin/env bash
# Device call 4 of 2026-12-02c: build at the review's refactor (one from_cache() for a layout's
# stored choice); test_native (its cuDNN graph case covers both cache paths); the quick GPU check.
#   bash docs/measurements/2026-12-02c/call4.sh   (device machine, repository root; carry .deps)
set -uo pipefail
out=${OUT:?}
b=build/gpu/bin
{
  timeout 300 scripts/device_build.sh >/tmp/build.log 2>&1 || { grep -E "error|Error" /tmp/build.log | head -30; exit 1; }
  timeout 150 $b/test_native > "$out/test_native_full.log" 2>&1
  grep -E "ERROR|FAILED|test cases|assertions" "$out/test_native_full.log" | head -20
  timeout 100 scripts/gpu_check.sh --no-build --quick --out /tmp/gc >/dev/null 2>&1
  cp /tmp/gc/gpu_check.log "$out/gpu_check_quick.log"
  tail -1 /tmp/gc/gpu_check.log
} 2>&1 | tee "$out/summary.log"
