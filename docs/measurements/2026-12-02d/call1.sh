#!/usr/bin/env bash
# Device call 1 of 2026-12-02d: build; test_native on the GPU (its new cases: the narrow kernels
# against float64, directly and in DnCNN / DRUNet; the upsample folded into UNet's up
# convolutions); the quick GPU check; then nn_time A/B for the two changes, each network with
# the defaults (profiled) and with one change off: UNet 3 ch 2048² (u: the upsample as its own
# step; k: no narrow kernels), DnCNN 3 ch 2048² (k), DRUNet 1 ch 4096² fp32 and bf16 (k); and
# DRUNet fp32's compile with the plan cache, cold then twice cached.
#   bash docs/measurements/2026-12-02d/call1.sh   (device machine, repository root; carry .deps)
set -uo pipefail
out=${OUT:?}
b=build/gpu/bin
t0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t0 )) s] $*"; }
{
  stamp build
  timeout 400 scripts/device_build.sh >/tmp/build.log 2>&1 || { grep -E "error|Error" /tmp/build.log | head -30; tail -20 /tmp/build.log; exit 1; }
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  stamp test_native
  timeout 240 $b/test_native > "$out/1_test_native_full.log" 2>&1
  grep -E "ERROR|FAILED|test cases|assertions" "$out/1_test_native_full.log" | head -40
  stamp gpu_check
  timeout 150 scripts/gpu_check.sh --no-build --quick --out /tmp/gc >/dev/null 2>&1
  cp /tmp/gc/gpu_check.log "$out/1_gpu_check_quick.log"
  tail -1 /tmp/gc/gpu_check.log
} 2>&1 | tee "$out/1_build_test.log"
{
  nt() {  # arch, channels, shape, then nn_time options
    local a=$1 c=$2 s=$3; shift 3
    stamp "nn_time $a $c $s $*"
    timeout 60 $b/nn_time $a $c $s --device cuda --backends native "$@" 2>&1 | grep -vE "^\s*$" | tee -a "$out/2_ab_full.log" |
      grep -E "^nn_time|rror|^ +[0-9.]+ ms" | cut -c1-230 | head -24
  }
  nt unet 3 2048x2048 --profile 3
  nt unet 3 2048x2048 --native cfagbeGu
  nt unet 3 2048x2048 --native cfagbeGk
  nt dncnn 3 2048x2048 --profile 3
  nt dncnn 3 2048x2048 --native cfagbeGk
  nt drunet 1 4096x4096 --profile 3
  nt drunet 1 4096x4096 --native cfagbeGk
  nt drunet 1 4096x4096 --dtype bfloat16
  nt drunet 1 4096x4096 --dtype bfloat16 --native cfagbeGk
  # the compile from the plan cache (fp32): cold, then twice from the network's list
  rm -rf /tmp/pc
  for run in cold cached cached; do nt drunet 1 4096x4096 --native cfagbeGp --cache /tmp/pc; done
  grep -E "capture|plan cache|weights" "$out/2_ab_full.log" | tail -6 | cut -c1-300
  stamp done
} 2>&1 | tee "$out/2_ab.log"
