#!/usr/bin/env bash
# Configure and build pnp on the GPU machine (Ubuntu 24.04, torch in /opt/torch/.venv,
# no toml++ package): unpacks the toml++ .debs carried in .deps/, then builds the given
# targets (all when none) in build/gpu for sm_90.
#   scripts/device_build.sh [target ...]
# Prepare here once:  mkdir -p .deps && (cd .deps && apt-get download libtomlplusplus-dev libtomlplusplus3 \
#   libboost1.74-dev libboost-program-options1.74-dev libboost-program-options1.74.0 doctest-dev)
# (the GPU image has no Boost.Program_options or doctest either; found via CMAKE_PREFIX_PATH)
# and name .deps in the device tool's carry list.
set -euo pipefail
root=$PWD/.deps/root
mkdir -p "$root"
for f in .deps/*.deb; do  # unpack each carried .deb once (a warm machine keeps .deps/root)
  stamp="$root/.unpacked.$(basename "$f")"
  [ -f "$stamp" ] || { dpkg -x "$f" "$root" && touch "$stamp"; }
done
export PATH=/opt/torch/.venv/bin:/usr/local/cuda/bin:$PATH
export LD_LIBRARY_PATH=$root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
venv_nv=$(python3 -c 'import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))' 2>/dev/null)/nvidia || true
gen=""; command -v ninja >/dev/null && gen="-G Ninja"
mkdir -p build/gpu
cmake -S . -B build/gpu $gen -DCMAKE_BUILD_TYPE=Release -DPNP_WITH_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DTORCH_CUDA_ARCH_LIST=9.0 \
  -Dtomlplusplus_DIR="$root/usr/lib/x86_64-linux-gnu/cmake/tomlplusplus" -DCMAKE_PREFIX_PATH="$root/usr" \
  -DCMAKE_LIBRARY_PATH="$venv_nv/cu13/lib" >build/gpu-configure.log 2>&1 || { cat build/gpu-configure.log; exit 1; }
if [ $# -gt 0 ]; then
  cmake --build build/gpu -j"$(nproc)" --target "$@"
else
  cmake --build build/gpu -j"$(nproc)"
fi
