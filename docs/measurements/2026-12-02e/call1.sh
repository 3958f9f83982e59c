#!/usr/bin/env bash
# Device call 1 of 2026-12-02e: build test_native and nn_time; the Hopper kernel's test case
# (every variant's error against float64 and cuDNN's) and the narrow kernel's; then the A/B of
# the Hopper kernel (w: off) in DnCNN 3 ch 2048² and DRUNet 1 ch 4096², fp32 and bf16, with
# profiles.
#   bash docs/measurements/2026-12-02e/call1.sh   (device machine, repository root; carry .deps)
set -uo pipefail
out=${OUT:?}
b=build/gpu/bin
t0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t0 )) s] $*"; }
{
  stamp build
  timeout 400 scripts/device_build.sh test_native nn_time >/tmp/build.log 2>&1 || { grep -E "error|Error" /tmp/build.log | head -30; tail -20 /tmp/build.log; exit 1; }
  grep -E "pnp: (CUTLASS|cuDNN frontend)" build/gpu-configure.log
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  stamp test_native Hopper
  timeout 240 $b/test_native -tc="*Hopper*" -s > "$out/1_test_hopper.log" 2>&1
  echo "rc=$?"
  grep -E "rel err|ERROR|FAILED|test cases|assertions|rror" "$out/1_test_hopper.log" | cut -c1-200 | head -120
  stamp test_native narrow
  timeout 120 $b/test_native -tc="*narrow*" 2>&1 | grep -E "ERROR|FAILED|test cases|assertions" | head
} 2>&1 | tee "$out/1_build_test.log"
{
  nt() {  # arch, channels, shape, then nn_time options
    local a=$1 c=$2 s=$3; shift 3
    stamp "nn_time $a $c $s $*"
    timeout 90 $b/nn_time $a $c $s --device cuda --backends native "$@" 2>&1 | grep -vE "^\s*$" | tee -a "$out/2_ab_full.log" |
      grep -E "^nn_time|rror|^ +[0-9.]+ ms|Hopper" | grep -E "^nn_time|rror|Hopper|wgmma|tilesize|nhwcToNchw" | cut -c1-230 | head -14
  }
  nt dncnn 3 2048x2048 --profile 3
  nt dncnn 3 2048x2048 --native cfagbeGw
  nt drunet 1 4096x4096 --profile 3
  nt drunet 1 4096x4096 --native cfagbeGw
  nt drunet 1 4096x4096 --dtype bfloat16 --profile 3
  nt drunet 1 4096x4096 --dtype bfloat16 --native cfagbeGw
  stamp done
} 2>&1 | tee "$out/2_ab.log"
