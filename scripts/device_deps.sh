#!/usr/bin/env bash
# Prepares .deps/ here for the device tool's GPU machine (scripts/device_env.sh unpacks it there),
# small enough that .deps/ and .whl/ travel with the tree in one call (64 MiB in all).
#   scripts/device_deps.sh
# - the Debian packages of toml++, Boost.Program_options (library and CMake config) and doctest,
#   by name (apt-get download);
# - of libboost1.74-dev (9.5 MB, every Boost header) only what pnp compiles against: the headers
#   <boost/program_options.hpp> reaches with this machine's g++ in C++17 and C++20, all of
#   boost/config (it picks headers by compiler), and Boost's CMake config, as
#   .deps/boost1.74-program-options-headers.tar.gz; the .deb itself is left out;
# - the cuDNN frontend and CUTLASS headers (the include/ folders of their PyPI wheels, pinned as
#   in device_env.sh) as tarballs, where .deps has none yet.
# Checks that a program including <boost/program_options.hpp> takes every Boost header from the
# tarball (none from this machine's /usr/include). The device machine's g++ 13 may reach a header
# this g++ does not: then put libboost1.74-dev's .deb back in .deps (device_env.sh unpacks any).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .deps
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

(cd .deps && apt-get download libtomlplusplus-dev libtomlplusplus3 libboost-program-options1.74-dev \
  libboost-program-options1.74.0 doctest-dev)
(cd "$work" && apt-get download libboost1.74-dev)
rm -f .deps/libboost1.74-dev_*.deb
dpkg -x "$work"/libboost1.74-dev_*.deb "$work/full"

if ! ls .deps/nvidia-cudnn-frontend-*-include.tar.gz >/dev/null 2>&1; then
  python3 -m pip download -q --no-deps --python-version 3.12 --only-binary=:all: --platform manylinux_2_28_x86_64 \
    nvidia-cudnn-frontend==1.32.0 -d "$work/fe"
  (cd "$work/fe" && python3 -m zipfile -e ./*.whl x)
  tar czf .deps/nvidia-cudnn-frontend-1.32.0-include.tar.gz -C "$work/fe/x" include
fi
if ! ls .deps/nvidia-cutlass-*-include.tar.gz >/dev/null 2>&1; then
  python3 -m pip download -q --no-deps nvidia-cutlass==4.2.0.0 -d "$work/cutlass"
  (cd "$work/cutlass" && python3 -m zipfile -e ./*.whl x)
  tar czf .deps/nvidia-cutlass-4.2.0.0-include.tar.gz -C "$work/cutlass/x/cutlass_library/source" include
fi

# the headers program_options reaches, resolved in the package's tree
printf '#include <boost/program_options.hpp>\nint main() { return 0; }\n' >"$work/po.cpp"
for std in c++17 c++20; do
  g++ -std=$std -I"$work/full/usr/include" -M "$work/po.cpp"
done | tr ' \\' '\n\n' | grep -F "$work/full/usr/include/boost/" | sed "s|^$work/full/||" | sort -u >"$work/list"
(cd "$work/full" && find usr/include/boost/config usr/lib/x86_64-linux-gnu/cmake -type f) >>"$work/list"
sort -u -o "$work/list" "$work/list"
tar czf .deps/boost1.74-program-options-headers.tar.gz -C "$work/full" -T "$work/list"

# the check: every Boost header of the same program from the tarball
mkdir -p "$work/slim" && tar xzf .deps/boost1.74-program-options-headers.tar.gz -C "$work/slim"
outside=$(g++ -std=c++17 -I"$work/slim/usr/include" -M "$work/po.cpp" | tr ' \\' '\n\n' | grep "/boost/" |
  grep -vcF "$work/slim/" || true)
[ "$outside" = 0 ] || { echo "device_deps.sh: $outside Boost headers not in the tarball" >&2; exit 1; }
echo "device_deps.sh: $(wc -l <"$work/list") files in .deps/boost1.74-program-options-headers.tar.gz;" \
  "$(du -sh .deps | cut -f1) in .deps"
