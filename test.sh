#!/usr/bin/env bash
# Runs the test suite (installs what it needs into .venv first).
set -euo pipefail
cd "$(dirname "$0")"
scripts/env.sh
export TILELANG_TT_ARTIFACT_DIR=${TILELANG_TT_ARTIFACT_DIR:-$PWD/build/test-artifacts}
# a worker per core (pytest-xdist; a test file stays on one worker): most of the suite's time is C++ builds of the
# generated host programs and kernels for tt-sim, one process at a time each
exec .venv/bin/python -m pytest -q -n "${TEST_WORKERS:-$(nproc)}" --dist loadfile "$@"
