"""``import tilelang_tt`` stays light: the passes, the codegen and their dependencies load on the first compile."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

HEAVY = ("jinja2", "jsonschema", "tilelang_tt.codegen", "tilelang_tt.pipeline", "tilelang_tt.transform",
         "tilelang_tt.emulator", "tilelang_tt.plan", "tilelang_tt.intrinsics", "tilelang_tt.perf_model")


def _modules_after(code: str, tmp_path) -> set:
    script = f"import sys, json\nsys.path.insert(0, {str(ROOT)!r})\n{code}\nprint(json.dumps(sorted(sys.modules)))\n"
    env = dict(os.environ, TILELANG_CACHE_DIR=str(tmp_path / "tlcache"), TILELANG_TT_ARTIFACT_DIR=str(tmp_path / "a"))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return set(json.loads(proc.stdout.strip().splitlines()[-1]))


def test_import_does_not_load_the_compiler(tmp_path):
    loaded = _modules_after("import tilelang, tilelang_tt\nimport tilelang.language as T\n"
                            "assert tilelang.compile and T.annotate_tt_schedule", tmp_path)
    assert not [m for m in HEAVY if m in loaded]


def test_first_compile_loads_it(tmp_path):
    loaded = _modules_after("import tilelang, tilelang_tt\nfrom examples import kernels as K\n"
                            "tilelang.compile(K.elementwise_add(64, 64), target='tt')", tmp_path)
    assert {"tilelang_tt.codegen", "tilelang_tt.pipeline"} <= loaded
    assert "jsonschema" not in loaded        # the schema is checked at trust boundaries, not per compile (plan.py)


def test_reloading_the_intrinsics_keeps_their_ops():
    """TVM's op registry outlives a module reload: the ops are registered once per process (TVM refuses a second
    registration) and the reloaded module finds the same ones."""
    import importlib

    import tilelang_tt.intrinsics as intrinsics

    before = intrinsics.TTOps.matmul
    reloaded = importlib.reload(intrinsics)
    assert not reloaded._FIRST_LOAD and reloaded.TTOps.matmul.same_as(before)
    assert int(reloaded.TTOps.matmul.num_inputs) == 6
