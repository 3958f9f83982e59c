#!/usr/bin/env bash
# Device call 1 of 2026-12-03d: the rows kernel with every step issuing the same products, so
# that ptxas keeps a step's first products in flight behind the store (one wgmma group, where
# the version before had each product in a group of its own and its store waited for all).
# The build; test_native on the GPU; nn_time (DnCNN 3 ch 2048², DRUNet 1 ch 4096² fp32 and
# bf16, UNet) with profiles, and against cuDNN alone (`cfagbeG`); then the version before
# (old_rows_kernels.cu.txt, untracked: 1858f77's kernel) rebuilt into the same tree and timed
# the same way, for an A/B on one machine.
#   bash docs/measurements/2026-12-03d/call1.sh   (device machine, repository root; carry .deps .whl)
set -uo pipefail
out=${OUT:?}
b=build/gpu/bin
t0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t0 )) s] $*"; }
nt() {  # log, arch, channels, shape, then nn_time options
  local log=$1 a=$2 c=$3 s=$4; shift 4
  stamp "nn_time $a $c $s $*"
  timeout 90 $b/nn_time $a $c $s --device cuda --backends native "$@" 2>&1 | grep -vE "^\s*$" | tee -a "$out/$log" |
    grep -E "^nn_time|rror|^ +[0-9.]+ ms" | cut -c1-220 | head -14
}
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  stamp build
  timeout 300 scripts/device_build.sh >/tmp/build.log 2>&1 || { grep -E "error|Error" /tmp/build.log | head -30; tail -20 /tmp/build.log; exit 1; }
  stamp test_native
  timeout 150 $b/test_native > "$out/1_test_native.log" 2>&1
  echo "rc=$?"
  grep -E "ERROR|FAILED|test cases|assertions" "$out/1_test_native.log" | head -30
} 2>&1 | tee "$out/1_build_test.log"
{
  nt 2_new_full.log dncnn 3 2048x2048 --profile 3
  nt 2_new_full.log dncnn 3 2048x2048 --native cfagbeG
  nt 2_new_full.log drunet 1 4096x4096 --profile 3
  nt 2_new_full.log drunet 1 4096x4096 --dtype bfloat16 --profile 3
  nt 2_new_full.log unet 3 2048x2048
  nt 2_new_full.log unet 3 2048x2048 --dtype bfloat16
  stamp done
} 2>&1 | tee "$out/2_new.log"
{
  stamp "rebuild with the kernel before"
  cp old_rows_kernels.cu.txt src/nn/native/wgmma_rows_kernels.cu
  timeout 200 scripts/device_build.sh nn_time >/tmp/build_old.log 2>&1 || { tail -20 /tmp/build_old.log; exit 1; }
  nt 3_old_full.log dncnn 3 2048x2048 --profile 3
  nt 3_old_full.log drunet 1 4096x4096 --profile 3
  nt 3_old_full.log drunet 1 4096x4096 --dtype bfloat16
  stamp done
} 2>&1 | tee "$out/3_old.log"
