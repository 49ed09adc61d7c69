#!/usr/bin/env bash
# Runs the test suite (installs what it needs into .venv first).
set -euo pipefail
cd "$(dirname "$0")"
scripts/env.sh
export TILELANG_TT_ARTIFACT_DIR=${TILELANG_TT_ARTIFACT_DIR:-$PWD/build/test-artifacts}
exec .venv/bin/python -m pytest -q "$@"
