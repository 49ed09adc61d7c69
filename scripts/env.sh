#!/usr/bin/env bash
# Creates the project-local virtualenv .venv and installs what tilelang-tt needs, in the order that keeps
# pip from pulling a CUDA build of torch: torch 2.13.0 (CPU) first, then the project (tilelang 0.1.15 ...).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

# The real-header check compiles kernels with Debian's bare-metal RISC-V GCC (see docs/real_sdk.md).
if ! command -v riscv64-unknown-elf-g++ >/dev/null 2>&1 || [ ! -d /usr/lib/picolibc/riscv64-unknown-elf ] \
   || [ ! -d /usr/include/x86_64-linux-gnu/c++/12/32 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq gcc-riscv64-unknown-elf picolibc-riscv64-unknown-elf \
    g++-12-multilib >/dev/null
fi
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.tilelang_tt_installed
# Reinstall when the build inputs changed (pyproject, CMake files, the emulator's C++ sources).
newest=$(find pyproject.toml CMakeLists.txt cmake src -type f -newer "$stamp" 2>/dev/null | head -n 1 || true)
if [ ! -f "$stamp" ] || [ -n "$newest" ]; then
  .venv/bin/pip install -q --upgrade pip
  # PyTorch's CPU wheel index first (PyPI's Linux torch is the CUDA build); PyPI when that index is unreachable.
  # TORCH_INDEX overrides the index.
  .venv/bin/pip install -q torch==2.13.0 --index-url "${TORCH_INDEX:-https://download.pytorch.org/whl/cpu}" \
      --timeout 15 --retries 0 2>/dev/null || .venv/bin/pip install -q torch==2.13.0
  .venv/bin/pip install -q -e ".[test]"
  touch "$stamp"
fi
