#!/usr/bin/env bash
# Configure and build pnp on the GPU machine of the device tool (scripts/device_env.sh says
# what it provides and how to prepare .deps/), then build the given targets (all when none) in
# build/gpu for sm_90.
#   scripts/device_build.sh [target ...]
set -euo pipefail
# shellcheck source=scripts/device_env.sh
. scripts/device_env.sh
root=$pnp_deps_root
venv_nv=$(python3 -c 'import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))' 2>/dev/null)/nvidia || true
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
mkdir -p build/gpu
cmake -S . -B build/gpu "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DPNP_WITH_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DTORCH_CUDA_ARCH_LIST=9.0 \
  -Dtomlplusplus_DIR="$root/usr/lib/x86_64-linux-gnu/cmake/tomlplusplus" -DCMAKE_PREFIX_PATH="$root/usr" \
  -DCMAKE_LIBRARY_PATH="$venv_nv/cu13/lib" >build/gpu-configure.log 2>&1 || { cat build/gpu-configure.log; exit 1; }
if [ $# -gt 0 ]; then
  cmake --build build/gpu -j"$(nproc)" --target "$@"
else
  cmake --build build/gpu -j"$(nproc)"
fi
