#!/usr/bin/env bash
# Device call 4 of 2026-12-02e, at HEAD (the Hopper kernel off by default, w turns it on): build
# everything; test_native (all cases); the quick GPU check; DRUNet 1 ch 4096² fp32 with the
# defaults and with w.
#   bash docs/measurements/2026-12-02e/call4.sh   (device machine, repository root; carry .deps)
set -uo pipefail
out=${OUT:?}
b=build/gpu/bin
t0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t0 )) s] $*"; }
{
  stamp build
  timeout 400 scripts/device_build.sh >/tmp/build.log 2>&1 || { grep -E "error|Error" /tmp/build.log | head -30; tail -20 /tmp/build.log; exit 1; }
  stamp test_native
  timeout 200 $b/test_native > "$out/1_test_native_full.log" 2>&1
  echo "rc=$?"
  grep -E "ERROR|FAILED|test cases|assertions" "$out/1_test_native_full.log" | head -30
  stamp gpu_check
  timeout 120 scripts/gpu_check.sh --no-build --quick --out /tmp/gc >/dev/null 2>&1
  cp /tmp/gc/gpu_check.log "$out/2_gpu_check_quick.log"
  tail -1 /tmp/gc/gpu_check.log
  for o in cfagbeG cfagbeGw; do
    stamp "nn_time drunet 1 4096x4096 --native $o"
    timeout 60 $b/nn_time drunet 1 4096x4096 --device cuda --backends native --native $o 2>&1 | grep -E "^nn_time" | cut -c1-200
  done
  stamp done
} 2>&1 | tee "$out/1_build_test.log"
