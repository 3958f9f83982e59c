#!/usr/bin/env bash
# Device call 1 of 2026-12-01f: build at HEAD, the CUDA cases changed since a59c0ea, the set-up
# breakdown, the quick GPU check; then the projector patch, its CUDA cases and its bench.
#   bash docs/measurements/2026-12-01f/call1.sh   (on the device machine, repository root)
set -uo pipefail
out=${OUT:?}
b=build/gpu/bin
t0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t0 )) s] $*"; }
{
stamp build; scripts/device_build.sh >/tmp/build.log 2>&1 || { tail -60 /tmp/build.log; exit 1; }
stamp test_physics CUDA; $b/test_physics -tc='CUDA*' 2>&1 | tail -4
stamp test_native; $b/test_native -tc='*warm-up*,*equals eager on CUDA*' 2>&1 | tail -4
stamp test_solver; $b/test_solver 2>&1 | tail -4
} 2>&1 | tee "$out/1_build_tests.log"
stamp setup; scripts/gpu_measure.sh setup >/dev/null 2>&1; mv "$out/setup.log" "$out/2_setup.log"
stamp gpu_check; scripts/gpu_check.sh --no-build --quick --out /tmp/gc >/dev/null 2>&1; cp /tmp/gc/gpu_check.log "$out/3_gpu_check_quick.log"
{
stamp probe
python3 --version; ls /opt/torch/.venv/lib/python3*/site-packages/nvidia/cudnn/include | head -3
grep -m3 -E "define CUDNN_(MAJOR|MINOR|PATCHLEVEL)" /opt/torch/.venv/lib/python3*/site-packages/nvidia/cudnn/include/cudnn_version.h
ls /opt/torch/.venv/lib/python3*/site-packages/nvidia/cudnn/lib | head
ls /opt/torch/.venv/lib/python3*/site-packages/torch/include/ATen/cudnn/ | head
stamp projector patch
git apply docs/measurements/2026-12-01e/projector_row_staging.patch && echo applied
cmake --build build/gpu -j16 --target test_physics pnp_radon_bench 2>&1 | grep -E "error|warning: .*register|Error" | head -20
$b/test_physics -tc='CUDA*' 2>&1 | tail -4
for i in 1 2; do $b/pnp_radon_bench --n 4096 --angles 100 --device cuda; done
$b/pnp_recon input/study_4096.toml --output /tmp/study_patch.h5 --force --set compile.mode='"pre"' 2>&1 | grep -vE "^iteration " | tail -30
git apply -R docs/measurements/2026-12-01e/projector_row_staging.patch && echo reverted
stamp done
} 2>&1 | tee "$out/4_projector_patch.log"
