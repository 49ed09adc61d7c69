"""Repository rules: one attribute-key registry, no print() in library code, imports without circles that run
down the layers, atomic artifacts, the CLI."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tilelang_tt import attrs
from tilelang_tt.artifact import content_hash, safe_name, write_artifact

PKG = Path(__file__).resolve().parents[2] / "python" / "tilelang_tt"
ROOT = PKG.parents[1]


def test_attribute_keys_only_in_the_registry():
    offenders = []
    for path in PKG.rglob("*.py"):
        if path.name == "attrs.py":
            continue
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"""["']tt\.[a-z_]+["']""", line):
                offenders.append(f"{path.relative_to(PKG)}:{i}: {line.strip()}")
    assert not offenders, "spell tt.* attribute keys through tilelang_tt.attrs:\n" + "\n".join(offenders)
    assert len(set(attrs.ALL_KEYS)) == len(attrs.ALL_KEYS)


def test_no_print_in_library_code():
    for path in PKG.rglob("*.py"):
        if path.name == "cli.py":
            continue
        assert not re.search(r"^\s*print\(", path.read_text(), re.M), path


def _import_graph():
    import importlib.util

    spec = importlib.util.spec_from_file_location("import_graph", ROOT / "scripts" / "import_graph.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_function_over_60_lines():
    """Library functions stay short enough to read whole: a longer one is split into named phases."""
    import ast

    long = []
    for path in sorted(PKG.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 60:
                long.append(f"{path.relative_to(PKG)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1})")
    assert not long, long


def test_imports_have_no_circle_and_run_down_the_layers():
    """scripts/import_graph.py (docs/design.md's picture): no module reaches itself through its imports, deferred
    ones included, and every import goes to the module's own layer or a lower one."""
    graph = _import_graph()
    assert graph.problems() == [], "\n".join(graph.problems())


def test_the_import_check_sees_a_circle_and_an_upward_import():
    """The check itself: one pass importing the codegen (what SuperBlockTT did) is both an upward import and a
    circle (codegen -> pipeline -> the pass)."""
    graph = _import_graph()
    edges = graph.graph()
    edges["transform.super_block"] = dict(edges["transform.super_block"], codegen=1)
    found = graph.problems(edges)
    assert any(line.startswith("import circle: ") and "tilelang_tt.codegen" in line and
               "tilelang_tt.transform.super_block" in line for line in found), found
    assert any("tilelang_tt.transform.super_block (layer passes) imports tilelang_tt.codegen (layer compile)" in line
               for line in found), found


def test_safe_name():
    assert safe_name("gemm") == "gemm"
    assert safe_name("a/b;$(rm -rf)") == "a_b___rm__rf_"
    assert safe_name("1x") == "k_1x"


def test_artifact_written_atomically_and_content_addressed(tmp_path):
    files = {"kernels/reader.cpp": "// r\n", "tt.plan.json": "{}\n"}
    d1 = write_artifact(files, "k", root=tmp_path)
    d2 = write_artifact(files, "k", root=tmp_path)
    assert d1 == d2 and d1.name == f"k-{content_hash(files)[:16]}"
    assert (d1 / "kernels" / "reader.cpp").read_text() == "// r\n"
    assert [p.name for p in tmp_path.iterdir()] == [d1.name]          # no temporary directories left


def test_failed_write_leaves_nothing(tmp_path, monkeypatch):
    import tilelang_tt.artifact as art

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(art.os, "rename", boom)
    with pytest.raises(OSError, match="disk full"):
        write_artifact({"a.txt": "x"}, "k", root=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_concurrent_identical_compiles_agree(tmp_path):
    script = (
        "import sys; sys.path.insert(0, sys.argv[1]); import os\n"
        "import tilelang, tilelang_tt\n"
        "from examples import kernels as K\n"
        "k = tilelang.compile(K.design_gemm(128, 128, 64), target='tt')\n"
        "print(k.artifact_dir)\n")
    root = tmp_path / "artifacts"
    env = {"TILELANG_TT_ARTIFACT_DIR": str(root), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path / "home")}
    procs = [subprocess.Popen([sys.executable, "-c", script, str(ROOT)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outs]
    dirs = {o[0].strip().splitlines()[-1] for o in outs}
    assert len(dirs) == 1
    assert [p.name for p in root.iterdir()] == [Path(dirs.pop()).name]   # one directory, no temporaries


def test_cli_compile(tmp_path):
    kernel_file = tmp_path / "my_kernel.py"
    kernel_file.write_text(
        "import tilelang.language as T\n"
        "@T.prim_func\n"
        "def scale(A: T.Tensor((64, 128), 'bfloat16'), C: T.Tensor((64, 128), 'bfloat16')):\n"
        "    with T.Kernel(4, 2, threads=128) as (bx, by):\n"
        "        for i, j in T.Parallel(32, 32):\n"
        "            C[by * 32 + i, bx * 32 + j] = A[by * 32 + i, bx * 32 + j] * 2.0\n")
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "tilelang_tt.cli", "compile", f"{kernel_file}:scale", "--out",
                           str(out), "--arch", "blackhole", "--max-cores", "3"], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(PKG.parent)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "kernel scale on blackhole" in proc.stdout and "3 cores" in proc.stdout
    assert sorted(p.name for p in out.rglob("*") if p.is_file()) == [
        "CMakeLists.txt", "compute.cpp", "dataflow_helpers.h", "host.cpp", "reader.cpp", "tt.plan.json",
        "tt.program.json", "tt.program.txt", "writer.cpp"]
    assert "mul_unary_tile(0, 0x40000000u)" in (out / "kernels" / "compute.cpp").read_text()


def test_cli_reports_our_error(tmp_path):
    kernel_file = tmp_path / "bad.py"
    kernel_file.write_text(
        "import tilelang.language as T\n"
        "@T.prim_func\n"
        "def bad(A: T.Tensor((50, 64, 2), 'float32'), C: T.Tensor((50, 64, 2), 'float32')):\n"
        "    with T.Kernel(2, 2, threads=128) as (bx, by):\n"
        "        for i, j in T.Parallel(32, 32):\n"
        "            C[by * 32 + i, bx * 32 + j, 0] = A[by * 32 + i, bx * 32 + j, 0]\n")
    proc = subprocess.run([sys.executable, "-m", "tilelang_tt.cli", "compile", f"{kernel_file}:bad", "--out",
                           str(tmp_path / "out")], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(PKG.parent)})
    assert proc.returncode == 1
    assert "tensor A of shape [50, 64, 2] is accessed in blocks that are not rectangles of one 2-D view" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_plan_schema_has_no_duplicate_keys():
    """json.loads keeps the last of two equal keys silently; a duplicated property would hide an edit."""
    import json

    def unique(pairs):
        keys = [k for k, _ in pairs]
        assert len(keys) == len(set(keys)), sorted(k for k in set(keys) if keys.count(k) > 1)
        return dict(pairs)

    json.loads((PKG / "schema" / "tt.plan.schema.json").read_text(), object_pairs_hook=unique)
