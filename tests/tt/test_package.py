"""One-file packages (kernel.export / tilelang_tt.load) and `tilelang-tt inspect`."""

import hashlib
import json
import shutil
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import tilelang
import torch

import tilelang_tt
from examples import kernels as K
from tilelang_tt import package
from tilelang_tt.errors import TTPackageError
from tilelang_tt.inspect_view import core_blocks

from .helpers import blocks_of
from .test_emulator import with_schedule

ROOT = Path(__file__).resolve().parents[2]
SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def gemm_package(tmp_path_factory):
    kernel = tilelang.compile(K.design_gemm(64, 96, 128), out_idx=[2], target="tt -max_cores=5")
    return kernel, kernel.export(tmp_path_factory.mktemp("pkg") / "gemm.ttpkg")


def test_export_then_load_and_run_in_another_process(gemm_package, tmp_path):
    kernel, path = gemm_package
    script = (
        "import sys, torch; sys.path.insert(0, sys.argv[1])\n"
        "import tilelang_tt\n"
        "k = tilelang_tt.load(sys.argv[2])\n"
        "torch.manual_seed(0)\n"
        "a, b = torch.randn(64, 128, dtype=torch.bfloat16), torch.randn(128, 96, dtype=torch.bfloat16)\n"
        "c = k(a, b)\n"                          # out_idx=[2] comes from the package
        "ref = a.float() @ b.float()\n"
        "err = float((c.float() - ref).abs().max() / ref.abs().max())\n"
        "print(err, k.plan['kernel'], k.package_header['arch'], len(k.plan['mapping']))\n")
    env = {"TILELANG_CACHE_DIR": str(tmp_path / "c"), "TILELANG_TT_ARTIFACT_DIR": str(tmp_path / "a"),
           "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", script, str(ROOT), str(path)], capture_output=True, text=True,
                          env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    err, name, arch, cores = proc.stdout.split()
    assert float(err) <= 4 * 2**-8 and (name, arch, cores) == ("gemm", "wormhole_b0", str(len(kernel.plan["mapping"])))
    extracted = next((tmp_path / "a").iterdir())
    assert (extracted / "host.cpp").read_text() == (kernel.artifact_dir / "host.cpp").read_text()


def test_header_fields(gemm_package):
    kernel, path = gemm_package
    header = package.read_header(path)
    assert header["arch"] == "wormhole_b0" and header["sdk"] == "0.81" and header["out_idx"] == [2]
    assert header["tilelang_tt"] == tilelang_tt.__version__ and len(header["uuid"]) == 36
    assert header["options"]["max_cores"] == 5
    _, files = package.unpack(path.read_bytes())
    assert files == {rel: (kernel.artifact_dir / rel).read_text() for rel in files}
    assert set(package.REQUIRED_FILES) <= set(files)


def test_load_directory_matches_compiled(gemm_package):
    kernel, _ = gemm_package
    loaded = tilelang_tt.load(kernel.artifact_dir, out_idx=[2])
    assert loaded.get_kernel_source() == kernel.get_kernel_source() and loaded.plan == kernel.plan
    a, b = torch.randn(64, 128, dtype=torch.bfloat16), torch.randn(128, 96, dtype=torch.bfloat16)
    assert torch.equal(loaded(a, b), kernel(a, b))


def _rehead(data: bytes, **changes) -> bytes:
    """The package with header fields changed and the header hash recomputed (a well-formed other package)."""
    _, _, n, _ = struct.unpack_from("<8sII32s", data)
    header = json.loads(data[48:48 + n])
    header.update(changes)
    head = json.dumps(header).encode()
    version = changes.get("format_version", package.FORMAT_VERSION)
    return struct.pack("<8sII32s", package.MAGIC, version, len(head), hashlib.sha256(head).digest()) + head + \
        data[48 + n:]


CORRUPTIONS = {
    "empty": (lambda d: b"", "no magic"),
    "not_a_package": (lambda d: b"PK\x03\x04" + d[4:], "not a tilelang-tt package"),
    "truncated_prefix": (lambda d: d[:20], "truncated"),
    "truncated_header": (lambda d: d[:60], "truncated inside its header"),
    "truncated_payload": (lambda d: d[:-700], "truncated: payload"),
    "appended": (lambda d: d + b"junk", "longer than its header says"),
    "flipped_payload_byte": (lambda d: d[:-300] + bytes([d[-300] ^ 0x01]) + d[-299:], "content hash mismatch"),
    "flipped_header_byte": (lambda d: d[:60] + bytes([d[60] ^ 0x20]) + d[61:], "header does not match"),
    "wrong_version": (lambda d: _rehead(d, format_version=2), "format version 2"),
    "wrong_sdk": (lambda d: _rehead(d, sdk="0.80"), "targets TT-Metalium 0.80"),
    "hash_mismatch": (lambda d: _rehead(d, content_hash="0" * 64), "content hash mismatch"),
}


@pytest.mark.parametrize("case", sorted(CORRUPTIONS))
def test_corrupted_package_is_a_clear_error(gemm_package, tmp_path, case):
    _, path = gemm_package
    damage, message = CORRUPTIONS[case]
    bad = tmp_path / "bad.ttpkg"
    bad.write_bytes(damage(path.read_bytes()))
    with pytest.raises(TTPackageError, match=message) as info:
        tilelang_tt.load(bad)
    assert info.value.fix and "tilelang_tt.load" in str(info.value)


def test_missing_file_and_bad_directory(tmp_path):
    with pytest.raises(TTPackageError, match="cannot read"):
        tilelang_tt.load(tmp_path / "nothing.ttpkg")
    (tmp_path / "dir").mkdir()
    with pytest.raises(TTPackageError, match="lacks tt.plan.json"):
        tilelang_tt.load(tmp_path / "dir")


def test_artifact_without_the_header_its_kernels_include_is_refused(gemm_package, tmp_path):
    kernel, _ = gemm_package
    broken = tmp_path / "artifact"
    shutil.copytree(kernel.artifact_dir, broken)
    (broken / "kernels" / "dataflow_helpers.h").unlink()
    with pytest.raises(TTPackageError, match=r"it lacks kernels/dataflow_helpers\.h"):
        tilelang_tt.load(broken)


def test_payload_with_unsafe_member_is_refused(gemm_package, tmp_path):
    kernel, _ = gemm_package
    files = {rel: (kernel.artifact_dir / rel).read_text() for rel in package.REQUIRED_FILES}
    data = package.pack({**files, "../escape.txt": "x"}, kernel.plan, {"arch": "wormhole_b0"}, [2])
    (tmp_path / "evil.ttpkg").write_bytes(data)
    with pytest.raises(TTPackageError, match="unexpected tar member"):
        tilelang_tt.load(tmp_path / "evil.ttpkg")


@pytest.mark.parametrize("schedule", [None, dict(policy="strided"), dict(policy="rect"),
                                      dict(order="block_linear(2)")], ids=["contiguous", "strided", "rect", "bl2"])
def test_core_blocks_follow_the_mapping(schedule):
    kernel = tilelang.compile(with_schedule(K.design_gemm(128, 192, 64), schedule), target="tt -max_cores=7")
    owned = core_blocks(kernel.plan)
    assert sorted((b, core) for core, blocks in owned.items() for b in blocks) == sorted(blocks_of(kernel.plan))


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
def test_inspect_cli_writes_svg_with_one_cell_per_core(gemm_package, tmp_path, arch):
    _, path = gemm_package
    if arch == "blackhole":
        kernel = tilelang.compile(K.elementwise_add(96, 64), target="tt -arch=blackhole")
        path = kernel.export(tmp_path / "add.ttpkg")
    svg = tmp_path / "view.svg"
    proc = subprocess.run([sys.executable, "-m", "tilelang_tt.cli", "inspect", str(path), "--svg", str(svg)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    plan = tilelang_tt.load(path).plan
    assert f"kernel {plan['kernel']} on {arch}" in proc.stdout and "uuid" in proc.stdout
    root = ET.parse(svg).getroot()
    rects = list(root.iter(f"{SVG}rect"))
    cores = [r for r in rects if r.get("class") == "core"]
    dev_y, dev_x = plan["device"]["grid"]
    assert len(cores) == dev_y * dev_x
    busy = [r for r in cores if r.get("fill") != "#eeeeee"]
    assert len(busy) == len(plan["mapping"])
    assert len([r for r in rects if r.get("class") == "cb"]) == len(plan["cbs"])
    assert len([r for r in rects if r.get("class") == "block"]) == plan["grid"][0] * plan["grid"][1]


def test_inspect_bad_input_exit_status(tmp_path):
    (tmp_path / "x.ttpkg").write_bytes(b"hello")
    proc = subprocess.run([sys.executable, "-m", "tilelang_tt.cli", "inspect", str(tmp_path / "x.ttpkg")],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 2 and "not a tilelang-tt package" in proc.stderr


def test_plan_schema_is_a_valid_schema():
    """plan.py no longer checks its schema at run time (it cost ~50 ms per process); this does."""
    import jsonschema

    from tilelang_tt import plan as plan_mod

    schema = plan_mod.schema()
    jsonschema.validators.validator_for(schema).check_schema(schema)
    broken = {**schema, "type": 12}
    with pytest.raises(jsonschema.SchemaError):
        jsonschema.validators.validator_for(broken).check_schema(broken)
