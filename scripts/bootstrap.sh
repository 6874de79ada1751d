#!/usr/bin/env bash
# Installs what building (and, with the argument `test`, testing) mla needs
# on Debian 12, with apt-get. Idempotent: prints nothing and touches nothing
# when all is present.
set -euo pipefail

packages=(
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools lld-22
  cmake ninja-build make g++ python3 libgtest-dev
  python3-dev pybind11-dev python3-pybind11 python3-numpy
)
# The Python package's tests, and its PyTorch custom op's.
[ "${1:-}" = test ] && packages+=(python3-pytest python3-torch)
# make fuzz: clang with libFuzzer and the sanitizer runtimes.
[ "${1:-}" = fuzz ] && packages+=(clang-22 libclang-rt-22-dev)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "bootstrap: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
