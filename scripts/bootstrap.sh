#!/usr/bin/env bash
# Installs every dependency of pnp on a fresh Debian/Ubuntu machine, by package name.
# Idempotent: when everything is present it only checks, in about a second.
#   scripts/bootstrap.sh            apt packages + the pinned torch wheel
#   scripts/bootstrap.sh --with-deepinv
#                                   also deepinv 0.5.0, the study's peer (pnp_bench's torch_compile
#                                   arms, python -m pnp_peer), with the torchvision of that torch
#   PNP_PIP_EXTRA="..."             extra pip packages (the tests add h5py, pytest, ...)
set -euo pipefail
with_deepinv=0
for a in "$@"; do
  case $a in
    --with-deepinv) with_deepinv=1 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "bootstrap: unknown argument $a (see --help)" >&2; exit 2 ;;
  esac
done

APT_PACKAGES=(build-essential cmake git pkg-config python3 python3-pip
              libopenmpi-dev openmpi-bin libhdf5-dev libtomlplusplus-dev
              libboost-program-options-dev doctest-dev shellcheck)
TORCH_PIN="torch==2.11.0"
PIP_PACKAGES=(h5py numpy pytest matplotlib pyyaml scikit-image lizard)
# The C++ headers of the cuDNN graph API and of CUTLASS, for a CUDA build (the cuDNN frontend's conv
# epilogues, pnp's Hopper kernels; ctest's cuda_sm80_build): header-only, installed without their
# Python dependencies. As the module each installs.
HEADER_PACKAGES=("nvidia-cudnn-frontend==1.32.0:cudnn" "nvidia-cutlass==4.2.0.0:cutlass_library")
# deepinv needs torchvision; this one is the build for torch 2.11.0 (pip keeps the torch pin)
[ $with_deepinv = 1 ] && PIP_PACKAGES+=("deepinv==0.5.0" "torchvision==0.26.0")

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "bootstrap: apt-get install ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

PY=${PYTHON:-python3}
pip_missing=()
$PY -c 'import torch,sys; sys.exit(0 if torch.__version__.split("+")[0]=="2.11.0" else 1)' 2>/dev/null \
  || pip_missing+=("$TORCH_PIN")
for p in "${PIP_PACKAGES[@]}" ${PNP_PIP_EXTRA:-}; do
  mod=${p%%==*}; [ "$p" = pyyaml ] && mod=yaml; [ "$p" = scikit-image ] && mod=skimage
  $PY -c "import ${mod}" 2>/dev/null || pip_missing+=("$p")
done
headers_missing=()
for p in "${HEADER_PACKAGES[@]}"; do
  $PY -c "import ${p##*:}" 2>/dev/null || headers_missing+=("${p%%:*}")
done
# Debian's system python refuses pip installs without this flag (PEP 668).
flag=""
if [ ${#pip_missing[@]} -gt 0 ] || [ ${#headers_missing[@]} -gt 0 ]; then
  $PY -m pip install --help 2>/dev/null | grep -q -- --break-system-packages && flag="--break-system-packages"
fi
if [ ${#pip_missing[@]} -gt 0 ]; then
  echo "bootstrap: pip install ${pip_missing[*]}"
  $PY -m pip install -q $flag "${pip_missing[@]}"
fi
if [ ${#headers_missing[@]} -gt 0 ]; then
  echo "bootstrap: pip install --no-deps ${headers_missing[*]}"
  $PY -m pip install -q --no-deps $flag "${headers_missing[@]}"
fi
echo "bootstrap: all dependencies present"
