#!/usr/bin/env bash
# Device call 2 of 2026-12-01f: the cuDNN graph epilogues (conv + residual add) built and tested
# against float64, DRUNet 4096² with them off / on / autotuned in fp32 and bf16; study_4096's
# first iteration (the CUDA context made while MPI starts, the new projector); the projector's
# kernels in the loop and in the bench under Nsight Compute; the quick GPU check.
#   bash docs/measurements/2026-12-01f/call2.sh   (device machine, repository root; carry .deps)
set -uo pipefail
out=${OUT:?}
b=build/gpu/bin
t0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t0 )) s] $*"; }
{
  stamp build
  scripts/device_build.sh >/tmp/build.log 2>&1 || { grep -E "error|Error" /tmp/build.log | head -30; tail -30 /tmp/build.log; exit 1; }
  grep -i "frontend" build/gpu-configure.log
  stamp test_native cuDNN graphs
  $b/test_native -tc='*cuDNN graph*' -s 2>&1 | grep -E "MESSAGE|rel err|ERROR|FAILED|CHECK|test cases|assertions|notes" | head -80
  stamp test_native CUDA cases
  $b/test_native -tc='*equals eager on CUDA*,*warm-up*' 2>&1 | tail -3
  stamp test_physics CUDA cases
  $b/test_physics -tc='CUDA*' 2>&1 | tail -3
} 2>&1 | tee "$out/1_build_tests.log"
[ -x $b/pnp_recon ] && [ -x $b/nn_time ] || exit 1
{
  for dt in float32 bfloat16; do
    for o in cfgb cfgbe cfagbe; do
      stamp "nn_time drunet 4096² $dt --native $o"
      $b/nn_time drunet 1 4096x4096 --device cuda --dtype $dt --backends native --native $o 2>&1 | tail -1
    done
  done
} 2>&1 | tee "$out/2_drunet.log"
{
  for i in 1 2; do
    stamp "study_4096 pre, run $i"
    $b/pnp_recon input/study_4096.toml --output /tmp/s$i.h5 --force --set compile.mode='"pre"' 2>&1 | grep -vE "^iteration " | tail -24
  done
} 2>&1 | tee "$out/3_study.log"
{
  m=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,lts__t_sector_hit_rate.pct,dram__bytes_read.sum
  stamp "ncu: the projector's kernels inside study_4096 (pre, 3 iterations; the power method's calls first)"
  ncu --clock-control none --cache-control none -k 'regex:fwd_kernel|transpose_kernel|adj_kernel' --metrics $m \
    $b/pnp_recon input/study_4096.toml --output /tmp/p.h5 --force --set compile.mode='"pre"' --set solver.iterations=3 \
    >/tmp/ncu_loop.txt 2>&1
  grep -E "^  [a-z_]+<|^  [a-z_]+\(|fwd_kernel|transpose_kernel|adj_kernel|gpu__time|per_second|hit_rate|dram__bytes" /tmp/ncu_loop.txt | tail -80
  stamp "ncu: the same kernels in pnp_radon_bench"
  ncu --clock-control none --cache-control none -k 'regex:fwd_kernel|transpose_kernel|adj_kernel' --metrics $m \
    $b/pnp_radon_bench --n 4096 --angles 100 --device cuda --reps 3 --warmup 1 --no-check 2>&1 |
    grep -E "fwd_kernel|transpose_kernel|adj_kernel|gpu__time|per_second|hit_rate|dram__bytes" | tail -40
  cp /tmp/ncu_loop.txt "$out/ncu_loop_raw.txt"
} 2>&1 | tee "$out/4_projector_profile.log"
stamp gpu_check
scripts/gpu_check.sh --no-build --quick --out /tmp/gc >/dev/null 2>&1
cp /tmp/gc/gpu_check.log "$out/5_gpu_check_quick.log"
tail -2 "$out/5_gpu_check_quick.log"
stamp done
