# shellcheck shell=bash
# Sourced by the scripts that build or run pnp on the GPU machine of the device tool (Ubuntu
# 24.04, torch in /opt/torch/.venv, no toml++, Boost.Program_options or doctest packages):
# unpacks the .debs carried in .deps/ into .deps/root (once per machine; a carry of .deps
# replaces the folder, so every call checks again) and puts their libraries, the venv's Python
# and CUDA on the paths. Does nothing where .deps/ holds no .deb.
#   . scripts/device_env.sh
# Prepare here once:  scripts/device_deps.sh  (the .debs by name, and of libboost1.74-dev only the
# headers Boost.Program_options reaches and Boost's CMake config, as a tarball unpacked here like
# a .deb: 4.3 MB in all, where the whole .deb made .deps 13.5 MB and left no room for .whl/ in
# the same call), and name .deps in the device tool's carry list.
pnp_deps_root=$PWD/.deps/root
if ls .deps/*.deb >/dev/null 2>&1; then
  mkdir -p "$pnp_deps_root"
  for f in .deps/*.deb .deps/boost*-headers.tar.gz; do
    [ -f "$f" ] || continue
    stamp="$pnp_deps_root/.unpacked.$(basename "$f")"
    case $f in
      *.deb) [ -f "$stamp" ] || { dpkg -x "$f" "$pnp_deps_root" && touch "$stamp"; } ;;
      *) [ -f "$stamp" ] || { tar xzf "$f" -C "$pnp_deps_root" && touch "$stamp"; } ;;
    esac
  done
  export LD_LIBRARY_PATH=$pnp_deps_root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
# The cuDNN frontend's C++ headers (the native backend's conv epilogues): the include/ folder of
# PyPI's wheel, carried in .deps as a tarball (the wheel's Python module is not needed):
#   pip download --no-deps --python-version 3.12 --only-binary=:all: --platform manylinux_2_28_x86_64 \
#     nvidia-cudnn-frontend==1.32.0 -d /tmp/fe && (cd /tmp/fe && python3 -m zipfile -e *.whl x && \
#     tar czf "$OLDPWD/.deps/nvidia-cudnn-frontend-1.32.0-include.tar.gz" -C x include)
fe_tar=
for f in .deps/nvidia-cudnn-frontend-*-include.tar.gz; do [ -f "$f" ] && fe_tar=$f; done
if [ -n "$fe_tar" ]; then
  fe_root=$PWD/.deps/root/cudnn_frontend
  [ -f "$fe_root/include/cudnn_frontend.h" ] || { mkdir -p "$fe_root" && tar xzf "$fe_tar" -C "$fe_root"; }
  export CUDNN_FRONTEND_INCLUDE=$fe_root/include
fi
# The CUTLASS / CuTe headers (pnp's Hopper convolution, src/nn/native/cuda/wgmma_conv_kernels.cu):
# the include/ folder of PyPI's nvidia-cutlass wheel, carried in .deps as a tarball:
#   pip download --no-deps nvidia-cutlass==4.2.0.0 -d /tmp/cutlass && (cd /tmp/cutlass && \
#     python3 -m zipfile -e *.whl x && tar czf "$OLDPWD/.deps/nvidia-cutlass-4.2.0.0-include.tar.gz" \
#     -C x/cutlass_library/source include)
cutlass_tar=
for f in .deps/nvidia-cutlass-*-include.tar.gz; do [ -f "$f" ] && cutlass_tar=$f; done
if [ -n "$cutlass_tar" ]; then
  cutlass_root=$PWD/.deps/root/cutlass
  [ -f "$cutlass_root/include/cute/arch/mma_sm90_gmma.hpp" ] || { mkdir -p "$cutlass_root" && tar xzf "$cutlass_tar" -C "$cutlass_root"; }
  export CUTLASS_INCLUDE=$cutlass_root/include
fi
[ -d /opt/torch/.venv/bin ] && export PATH=/opt/torch/.venv/bin:/usr/local/cuda/bin:$PATH
export PNP_PYTHON=${PNP_PYTHON:-$(command -v python3)}
