# shellcheck shell=bash
# Sourced by the scripts that build or run pnp on the GPU machine of the device tool (Ubuntu
# 24.04, torch in /opt/torch/.venv, no toml++, Boost.Program_options or doctest packages):
# unpacks the .debs carried in .deps/ into .deps/root (once per machine; a carry of .deps
# replaces the folder, so every call checks again) and puts their libraries, the venv's Python
# and CUDA on the paths. Does nothing where .deps/ holds no .deb.
#   . scripts/device_env.sh
# Prepare here once:  mkdir -p .deps && (cd .deps && apt-get download libtomlplusplus-dev libtomlplusplus3 \
#   libboost1.74-dev libboost-program-options1.74-dev libboost-program-options1.74.0 doctest-dev)
# and name .deps in the device tool's carry list.
pnp_deps_root=$PWD/.deps/root
if ls .deps/*.deb >/dev/null 2>&1; then
  mkdir -p "$pnp_deps_root"
  for f in .deps/*.deb; do
    stamp="$pnp_deps_root/.unpacked.$(basename "$f")"
    [ -f "$stamp" ] || { dpkg -x "$f" "$pnp_deps_root" && touch "$stamp"; }
  done
  export LD_LIBRARY_PATH=$pnp_deps_root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
# The cuDNN frontend's C++ headers (the native backend's conv epilogues), from a carried wheel:
#   pip download --no-deps --python-version 3.12 --only-binary=:all: \
#     --platform manylinux_2_28_x86_64 nvidia-cudnn-frontend==1.32.0 -d .whl   (carry .whl)
fe_whl=$(ls .whl/nvidia_cudnn_frontend-*.whl 2>/dev/null | head -1)
if [ -n "$fe_whl" ]; then
  fe_root=$PWD/.deps/cudnn_frontend
  [ -f "$fe_root/include/cudnn_frontend.h" ] || (mkdir -p "$fe_root" && cd "$fe_root" && python3 -m zipfile -e "$OLDPWD/$fe_whl" . >/dev/null)
  export CUDNN_FRONTEND_INCLUDE=$fe_root/include
fi
[ -d /opt/torch/.venv/bin ] && export PATH=/opt/torch/.venv/bin:/usr/local/cuda/bin:$PATH
export PNP_PYTHON=${PNP_PYTHON:-$(command -v python3)}
