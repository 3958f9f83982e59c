#!/usr/bin/env bash
# The GPU measurements still open (issues 7 and 10), in as few device calls as the 10-minute
# limit allows. Run on the device machine from the repository root, after
# scripts/device_build.sh; every result and log goes to $OUT (at most 8 files come back).
#   scripts/gpu_measure.sh tests     GPU test binaries: native (incl. bf16 on CUDA), physics, nn
#   scripts/gpu_measure.sh denoiser  ceilings; DRUNet 4096² eager/native in fp32 and bf16
#   scripts/gpu_measure.sh study     study_4096 at 1 GPU: pre in bf16, with a 40 GB and an 8 GB
#                                    memory limit, and eager bf16
# Prepared on 2026-12-01 without device time; not run yet.
set -uo pipefail
out=${OUT:?set OUT to the folder that comes back}
bin=build/gpu/bin
export PNP_PYTHON=/opt/torch/.venv/bin/python3
stage=${1:?usage: scripts/gpu_measure.sh tests|denoiser|study}
log="$out/$stage.log"
{
  echo "== $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown) stage $stage"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  case $stage in
    tests)
      for t in test_native test_physics test_nn; do
        echo "== $t"; "$bin/$t" -s 2>&1 | grep -E "MESSAGE|ERROR|FAILED|test cases|assertions" | tail -40
      done ;;
    denoiser)
      "$bin/pnp_bench" --ceilings --device cuda --output "$out/ceilings.h5" --force
      for dt in float32 bfloat16; do
        "$bin/nn_time" drunet 1 4096x4096 --device cuda --dtype "$dt" --backends eager,native --native cfg
      done ;;
    study)
      run() {  # name, then --set overrides
        local name=$1; shift
        echo "== study $name"
        # (the 4096² output files exceed what comes back: they stay in /tmp, the log keeps the figures)
        "$bin/pnp_recon" input/study_4096.toml --output "/tmp/study_$name.h5" --force "$@" 2>&1 |
          grep -vE "^iteration " | tail -25
      }
      run pre_bf16 --set compile.mode='"pre"' --set denoiser.precision='"bf16"'
      run none_bf16 --set denoiser.precision='"bf16"'
      run pre_limit40 --set compile.mode='"pre"' --set denoiser.memory_limit_gb=40
      run pre_limit8 --set compile.mode='"pre"' --set denoiser.memory_limit_gb=8 ;;
    *) echo "unknown stage $stage"; exit 2 ;;
  esac
} 2>&1 | tee "$log"
