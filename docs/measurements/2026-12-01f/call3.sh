#!/usr/bin/env bash
# Device call 3 of 2026-12-01f: the cuDNN graph epilogues chosen per layout by timing (the
# fastest of cuDNN's first three plans against conv then add_), tested against float64;
# DRUNet 4096² with autotune, generic against measured epilogues, fp32 and bf16;
# study_4096's first iteration; the quick GPU check.
#   bash docs/measurements/2026-12-01f/call3.sh   (device machine, repository root; carry .deps)
set -uo pipefail
out=${OUT:?}
b=build/gpu/bin
t0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t0 )) s] $*"; }
{
  stamp build
  scripts/device_build.sh >/tmp/build.log 2>&1 || { grep -E "error|Error" /tmp/build.log | head -30; tail -30 /tmp/build.log; exit 1; }
  stamp test_native cuDNN graphs
  timeout 200 $b/test_native -tc='*cuDNN graph*' -s 2>&1 | grep -E "MESSAGE|rel err|ERROR|FAILED|test cases|assertions|residual add" | head -60
} 2>&1 | tee "$out/1_build_tests.log"
[ -x $b/pnp_recon ] && [ -x $b/nn_time ] || exit 1
{
  for dt in float32 bfloat16; do
    for o in cfagb cfagbe; do
      stamp "nn_time drunet 4096² $dt --native $o"
      timeout 100 $b/nn_time drunet 1 4096x4096 --device cuda --dtype $dt --backends native --native $o 2>&1 | tail -1
    done
  done
} 2>&1 | tee "$out/2_drunet.log"
{
  stamp "study_4096 pre"
  timeout 60 $b/pnp_recon input/study_4096.toml --output /tmp/s1.h5 --force --set compile.mode='"pre"' 2>&1 | grep -vE "^iteration " | tail -24
} 2>&1 | tee "$out/3_study.log"
stamp gpu_check
timeout 150 scripts/gpu_check.sh --no-build --quick --out /tmp/gc >/dev/null 2>&1
cp /tmp/gc/gpu_check.log "$out/4_gpu_check_quick.log"
tail -2 "$out/4_gpu_check_quick.log"
stamp done
