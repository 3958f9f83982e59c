#!/usr/bin/env bash
# Device call 1 of 2026-12-03e: the rows kernel's epilogue through shared memory in bf16 with one
# input block (the residual's row loaded a step ahead by the bulk copy engine and read with
# transposing matrix loads; the output stored by transposing matrix stores into two 32-pixel
# staging chunks and bulk copies). The build; test_native on the GPU (stops if it fails);
# nn_time with profiles; DRUNet's compile with the plan cache; the side by side (pnp_bench);
# the quick GPU check; then 97c0603's kernel (old_rows_kernels.cu.txt, untracked) rebuilt into
# the same tree and timed on the same machine.
# Part 1 of 2 (the tree, .deps/ and .whl/ together pass the device tool's 64 MiB; call1b.sh
# runs right after on the same machine, its build and .deps/root kept there, carrying .whl).
#   bash docs/measurements/2026-12-03e/call1.sh   (device machine, repository root; carry .deps)
set -uo pipefail
out=${OUT:?}
here=docs/measurements/2026-12-03e
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
  rc=$?
  echo "rc=$rc"
  grep -E "ERROR|FAILED|test cases|assertions" "$out/1_test_native.log" | head -30
  echo $rc >/tmp/test_rc
} 2>&1 | tee "$out/1_build_test.log"
[ "$(cat /tmp/test_rc 2>/dev/null)" = 0 ] || exit 1
{
  nt 2_new_full.log drunet 1 4096x4096 --dtype bfloat16 --profile 3
  nt 2_new_full.log drunet 1 4096x4096 --profile 3
  nt 2_new_full.log dncnn 3 2048x2048
  nt 2_new_full.log dncnn 3 2048x2048 --dtype bfloat16 --profile 3
  nt 2_new_full.log unet 3 2048x2048
  nt 2_new_full.log unet 3 2048x2048 --dtype bfloat16
  rm -rf /tmp/pc
  for run in cold cached; do nt 2_new_full.log drunet 1 4096x4096 --native cfagbeGwp --cache /tmp/pc; done
  grep -E "compiled from the plan cache" "$out/2_new_full.log" | tail -1 | cut -c1-300
} 2>&1 | tee "$out/2_new.log"
{
  stamp gpu_check
  timeout 100 scripts/gpu_check.sh --no-build --quick --out /tmp/gc >/dev/null 2>&1
  cp /tmp/gc/gpu_check.log "$out/4_gpu_check_quick.log"
  tail -1 /tmp/gc/gpu_check.log
  stamp done
} 2>&1 | tee "$out/4_gpu_check.log"
