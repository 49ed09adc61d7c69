#!/usr/bin/env bash
# Main job: compile the design's GEMM, TileLang's example GEMM and elementwise kernels for Tenstorrent
# (wormhole_b0 and blackhole) and print each per-core plan and where the generated sources are.
set -euo pipefail
cd "$(dirname "$0")"
scripts/env.sh
exec .venv/bin/python examples/main.py "$@"
