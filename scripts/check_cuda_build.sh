#!/usr/bin/env bash
# Configures and compiles pnp's CUDA libraries for one compute capability on a machine without a
# GPU (ctest's cuda_sm80_build): the A100's build (CMakePresets.json's cuda-sm80) stays a tested
# target at every landing, not only when the GPU tier (scripts/gpu_check.sh, section 7) runs.
#   scripts/check_cuda_build.sh [ARCH] [TARGET ...]    ARCH 80 or 90 (default 80), TARGETs default
#                                                      pnp_nn pnp_physics (the CUDA kernels)
# Checks that the configuration found the cuDNN frontend (the conv epilogues as cuDNN graphs: the
# build an A100 user makes; scripts/bootstrap.sh installs its headers) and that every CUDA object
# holds code for sm_ARCH. Exit 77 (skipped) where no CUDA toolkit is installed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
arch=${1:-80}
[ $# -gt 0 ] && shift
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(pnp_nn pnp_physics)
case $arch in 80|90) ;; *) echo "check_cuda_build: ARCH must be 80 or 90 (a preset of CMakePresets.json)" >&2; exit 2 ;; esac
nvcc=$(command -v nvcc || true)
[ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
if [ -z "$nvcc" ]; then
  echo "check_cuda_build: no CUDA toolkit (nvcc on PATH or in /usr/local/cuda/bin): skipped"
  exit 77
fi
PATH=$(dirname "$nvcc"):$PATH
export PATH
dir=build/cuda-sm$arch
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! cmake --preset "cuda-sm$arch" >"$log" 2>&1; then
  tail -30 "$log"
  echo "check_cuda_build: configuring the cuda-sm$arch preset failed"
  exit 1
fi
if ! grep -q "conv epilogues as cuDNN graphs" "$log"; then
  grep "pnp:" "$log"
  echo "check_cuda_build: the configuration found no cuDNN frontend (run scripts/bootstrap.sh, or set CUDNN_FRONTEND_INCLUDE)"
  exit 1
fi
t0=$(date +%s)
if ! cmake --build "$dir" -j"$(nproc)" --target "${targets[@]}" >"$log" 2>&1; then
  grep -E "error" "$log" | head -30
  tail -10 "$log"
  echo "check_cuda_build: compiling ${targets[*]} for sm_$arch failed"
  exit 1
fi
# every CUDA object of the targets' libraries holds sm_ARCH code: its fat binary records the
# ptxas options it was assembled with ("-arch sm_80"); pnp's Hopper kernels, sm_90a only, are a
# library of their own that an sm_80 build leaves out of this check
n=0
while IFS= read -r -d '' o; do
  case $o in *pnp_nn_wgmma*) continue ;; esac
  n=$((n + 1))
  if ! grep -q -- "-arch sm_$arch " <(strings "$o"); then
    echo "check_cuda_build: $o holds no sm_$arch code (its fat binary's ptxas options: $(strings "$o" | grep -o -- '-arch sm_[0-9a-z]*' | sort -u | tr '\n' ' '))"
    exit 1
  fi
done < <(find "$dir/src" -name '*.cu.o' -print0)
if [ $n -eq 0 ]; then
  echo "check_cuda_build: no CUDA object built in $dir/src"
  exit 1
fi
echo "check_cuda_build: ${targets[*]} compiled for sm_$arch in $(( $(date +%s) - t0 )) s, $n CUDA objects with sm_$arch code"
