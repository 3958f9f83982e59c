#!/usr/bin/env bash
# Configure and build pnp on the GPU machine of the device tool (scripts/device_env.sh says
# what it provides and how to prepare .deps/), then build the given targets (all when none) in
# build/gpu for sm_90; PNP_CUDA_ARCH=80 builds for compute capability 8.0 (the A100) into
# build/gpu_sm80 instead (pnp's sm_90a kernels are compiled for their own architecture either way).
#   [PNP_CUDA_ARCH=80] scripts/device_build.sh [target ...]
set -euo pipefail
# shellcheck source=scripts/device_env.sh
. scripts/device_env.sh
root=$pnp_deps_root
venv_nv=$(python3 -c 'import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))' 2>/dev/null)/nvidia || true
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
arch=${PNP_CUDA_ARCH:-90}
case $arch in 90) dir=build/gpu ;; 80) dir=build/gpu_sm80 ;; *) echo "PNP_CUDA_ARCH must be 90 or 80" >&2; exit 2 ;; esac
mkdir -p "$dir"
cmake -S . -B "$dir" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DPNP_WITH_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES="$arch" -DTORCH_CUDA_ARCH_LIST="${arch:0:1}.${arch:1}" \
  -Dtomlplusplus_DIR="$root/usr/lib/x86_64-linux-gnu/cmake/tomlplusplus" -DCMAKE_PREFIX_PATH="$root/usr" \
  -DCMAKE_LIBRARY_PATH="$venv_nv/cu13/lib" >"$dir-configure.log" 2>&1 || { cat "$dir-configure.log"; exit 1; }
if [ $# -gt 0 ]; then
  cmake --build "$dir" -j"$(nproc)" --target "$@"
else
  cmake --build "$dir" -j"$(nproc)"
fi
