"""Files are never lost or trusted blindly (issue 22 item 6).

`--out` never deletes what tilelang-tt did not write; an edited artifact directory and damaged emulator builds
(host program, kernel objects) are detected and rebuilt; temporary names are unique per thread; relative
environment paths are resolved once; cache write failures only log; every CLI error is one line with a
documented exit code; malformed packages and FIFOs are our error, never a KeyError or a hang.
"""

import errno
import hashlib
import json
import logging
import os
import struct
import threading
from pathlib import Path

import pytest
import tilelang
import torch

import tilelang_tt
from examples import kernels as K
from tilelang_tt import artifact, cache, cli, emulator, package
from tilelang_tt.errors import TTError, TTPackageError
from tilelang_tt.runtime import TTKernelCache

KERNEL_FILE = """\
import tilelang.language as T


@T.prim_func
def add(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32"), C: T.Tensor((64, 64), "float32")):
    with T.Kernel(2, 2, threads=128) as (bx, by):
        for i, j in T.Parallel(32, 32):
            C[by * 32 + i, bx * 32 + j] = A[by * 32 + i, bx * 32 + j] + B[by * 32 + i, bx * 32 + j]
"""
TARGET = {"kind": "tt", "max_cores": 2}


@pytest.fixture
def tt_cache(tmp_path, monkeypatch):
    """A fresh $TILELANG_TT_CACHE_DIR: emulator builds and --out records start empty."""
    root = tmp_path / "ttcache"
    monkeypatch.setenv("TILELANG_TT_CACHE_DIR", str(root))
    return root


@pytest.fixture
def disk_cache(tmp_path, monkeypatch, artifact_root):
    """A fresh TileLang cache directory, every compile reaching it (as test_compile_cache.py)."""
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "tlcache"))
    monkeypatch.delenv("TILELANG_DISABLE_CACHE", raising=False)
    monkeypatch.delenv("TILELANG_TT_DUMP_IR", raising=False)
    TTKernelCache()._memory_cache.clear()
    yield tmp_path / "tlcache" / "tt"
    TTKernelCache()._memory_cache.clear()


def _compile(func=None):
    kernel = tilelang.compile(func if func is not None else K.elementwise_add(64, 64, "float32"), target=TARGET)
    TTKernelCache()._memory_cache.clear()
    return kernel


def _check_add(kernel, seed=0):
    torch.manual_seed(seed)
    a, b = torch.randn(64, 64), torch.randn(64, 64)
    c = torch.empty(64, 64)
    kernel(a, b, c)
    assert torch.equal(c, a + b)


def _cli(capsys, *argv):
    try:
        rc = cli.main([str(a) for a in argv])
    except SystemExit as stop:        # argparse's usage errors
        rc = stop.code
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def _one_line_error(err: str) -> str:
    assert err.startswith("error: ") and err.count("\n") == 1, repr(err)
    return err


# ---- compile --out -------------------------------------------------------------------------------------------
@pytest.fixture
def kernel_file(tmp_path):
    path = tmp_path / "k.py"
    path.write_text(KERNEL_FILE)
    return path


def test_out_onto_a_user_directory_refuses_and_keeps_its_files(kernel_file, tmp_path, tt_cache, capsys):
    proj = tmp_path / "proj"
    (proj / "src").mkdir(parents=True)
    (proj / "notes.txt").write_text("mine")
    (proj / "src" / "main.c").write_text("int main() {}")
    rc, _, err = _cli(capsys, "compile", f"{kernel_file}:add", "--out", proj)
    assert rc == cli.EXIT_INPUT == 2
    assert "non-empty directory that tilelang-tt did not write" in _one_line_error(err) and "refusing" in err
    assert (proj / "notes.txt").read_text() == "mine" and (proj / "src" / "main.c").read_text() == "int main() {}"
    assert sorted(p.name for p in proj.rglob("*")) == ["main.c", "notes.txt", "src"]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []    # no temporaries left


def test_out_onto_a_file_refuses(kernel_file, tmp_path, tt_cache, capsys):
    target = tmp_path / "f.txt"
    target.write_text("keep me")
    rc, _, err = _cli(capsys, "compile", f"{kernel_file}:add", "--out", target)
    assert rc == 2 and "is a file, not a directory" in _one_line_error(err)
    assert target.is_file() and target.read_text() == "keep me"


def test_out_replaces_only_an_unchanged_artifact_it_wrote(kernel_file, tmp_path, tt_cache, capsys):
    out = tmp_path / "out"
    out.mkdir()                                      # an empty directory is fine
    assert _cli(capsys, "compile", f"{kernel_file}:add", "--out", out)[0] == 0
    assert _cli(capsys, "compile", f"{kernel_file}:add", "--out", out)[0] == 0      # ours: replaced
    (out / "build-hw-0123").mkdir()                  # hardware.build_host's build directory is ours too
    (out / "build-hw-0123" / "host").write_bytes(b"\x7fELF")
    assert _cli(capsys, "compile", f"{kernel_file}:add", "--out", out)[0] == 0
    compute = out / "kernels" / "compute.cpp"
    compute.write_text(compute.read_text() + "// my experiment\n")
    rc, _, err = _cli(capsys, "compile", f"{kernel_file}:add", "--out", out)
    assert rc == 2 and "holds kernels/compute.cpp, changed after tilelang-tt wrote it" in _one_line_error(err)
    assert compute.read_text().endswith("// my experiment\n")
    compute.write_text(compute.read_text().removesuffix("// my experiment\n"))
    (out / "README").write_text("mine")
    rc, _, err = _cli(capsys, "compile", f"{kernel_file}:add", "--out", out)
    assert rc == 2 and "holds README, which tilelang-tt did not write" in _one_line_error(err)
    assert (out / "README").read_text() == "mine"


def test_write_artifact_refuses_for_api_callers_too(tmp_path, tt_cache):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "x").write_text("x")
    with pytest.raises(artifact.TTFileError, match="did not write"):
        artifact.write_artifact({"tt.plan.json": "{}"}, "k", exact_dir=tmp_path / "d")
    assert (tmp_path / "d" / "x").read_text() == "x"


# ---- artifact directories and the compile cache --------------------------------------------------------------
def test_edited_artifact_directory_is_rewritten_not_reused(tmp_path, caplog):
    files = {"kernels/compute.cpp": "// generated\n", "tt.plan.json": "{}\n"}
    d = artifact.write_artifact(files, "k", root=tmp_path)
    (d / "kernels" / "compute.cpp").write_text("// edited\n")
    with caplog.at_level(logging.WARNING, logger="tilelang_tt"):
        assert artifact.write_artifact(files, "k", root=tmp_path) == d
    assert (d / "kernels" / "compute.cpp").read_text() == "// generated\n"
    assert "was changed after it was written" in caplog.text
    assert [p.name for p in tmp_path.iterdir()] == [d.name]


def test_cache_hit_does_not_run_an_edited_artifact(disk_cache, tt_cache):
    first = _compile()
    compute = first.artifact_dir / "kernels" / "compute.cpp"
    original = compute.read_text()
    assert "add_binary_tile(" in original
    compute.write_text(original.replace("add_binary_tile(", "sub_binary_tile("))   # the edit would compute a - b
    second = _compile()
    assert second.compile_info["cache"] == "hit" and second.artifact_dir == first.artifact_dir
    assert compute.read_text() == original
    assert f"// ===== kernels/compute.cpp =====\n{original}" in second.get_kernel_source()
    _check_add(second)


def test_deleted_entry_json_is_rebuilt(disk_cache):
    assert _compile().compile_info["cache"] == "miss"
    (entry,) = (disk_cache / "kernels").iterdir()
    (entry / cache.ENTRY_FILE).unlink()
    assert _compile().compile_info["cache"] == "miss"
    assert (entry / cache.ENTRY_FILE).is_file()
    assert _compile().compile_info["cache"] == "hit"


# ---- emulator builds -----------------------------------------------------------------------------------------
def test_threads_call_a_freshly_built_kernel(tt_cache):
    kernel = _compile()
    errors = []

    def call(seed):
        try:
            _check_add(kernel, seed)
        except Exception as err:       # noqa: BLE001 - collected for the assertion
            errors.append(repr(err))

    threads = [threading.Thread(target=call, args=(seed,)) for seed in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    (host_dir,) = (tt_cache / "sim-hosts").iterdir()
    assert sorted(p.name for p in host_dir.iterdir()) == ["host", "host.sha256"]     # no temporaries left


def test_damaged_emulator_builds_are_rebuilt(tt_cache, caplog):
    kernel = _compile()
    _check_add(kernel)
    (host,) = (tt_cache / "sim-hosts").glob("*/host")
    objects = sorted((tt_cache / "sim-kernels").glob("*.so"))
    assert len(objects) == 3
    sizes = {p: p.stat().st_size for p in [host, *objects]}
    for path in sizes:
        os.truncate(path, 3000)              # a full disk or a killed build: exit code -7 / -11 before
    with caplog.at_level(logging.WARNING, logger="tilelang_tt"):
        _check_add(kernel, seed=1)
    assert "does not match the hash recorded" in caplog.text and "removed damaged kernel objects" in caplog.text
    assert {p: p.stat().st_size for p in sizes} == sizes
    os.truncate(objects[0], 10)              # too short for an ELF header: tt-sim cannot load it
    _check_add(kernel, seed=2)
    assert objects[0].stat().st_size == sizes[objects[0]]


def test_kernel_object_check():
    so = next(emulator.sim_install().lib.glob("libtt_sim.so"))
    assert emulator._elf_complete(str(so))
    data = so.read_bytes()
    for cut in (0, 10, 63, 64, len(data) // 2, len(data) - 1):
        partial = Path(os.environ.get("TMPDIR", "/tmp")) / f"tt-elf-{os.getpid()}-{cut}.so"
        partial.write_bytes(data[:cut])
        try:
            assert not emulator._elf_complete(str(partial)), cut
        finally:
            partial.unlink()


# ---- environment paths ---------------------------------------------------------------------------------------
def test_relative_environment_paths_are_resolved_once(tmp_path, monkeypatch, disk_cache):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TILELANG_TT_ARTIFACT_DIR", "relart")
    monkeypatch.setenv("TILELANG_TT_CACHE_DIR", "relcache")
    kernel = _compile()
    assert kernel.artifact_dir.is_absolute() and kernel.artifact_dir.parent == tmp_path / "relart"
    _check_add(kernel)
    assert list((tmp_path / "relcache" / "sim-hosts").glob("*/host"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)             # the same values still name the same directories
    assert artifact.artifact_root() == tmp_path / "relart"
    assert emulator.cache_root() == tmp_path / "relcache"
    _check_add(kernel, seed=1)
    assert not list(elsewhere.iterdir())


# ---- cache write failures ------------------------------------------------------------------------------------
@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS], ids=["disk_full", "read_only"])
def test_cache_write_failures_log_and_compile_on(code, disk_cache, monkeypatch, caplog):
    real_text, real_bytes = Path.write_text, Path.write_bytes

    def failing(real):
        def write(self, *args, **kwargs):
            if str(self).startswith(str(disk_cache)):
                raise OSError(code, os.strerror(code), str(self))
            return real(self, *args, **kwargs)
        return write

    monkeypatch.setattr(Path, "write_text", failing(real_text))
    monkeypatch.setattr(Path, "write_bytes", failing(real_bytes))
    with caplog.at_level(logging.WARNING, logger="tilelang_tt"):
        kernel = _compile()
    assert kernel.compile_info["cache"] == "miss" and kernel.compile_info["path"] is None
    assert "could not write compile-cache entry" in caplog.text and os.strerror(code) in caplog.text
    _check_add(kernel)


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS], ids=["disk_full", "read_only"])
def test_template_cache_write_failures_only_log(code, disk_cache, monkeypatch, caplog):
    import jinja2

    def fail(self, f):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(jinja2.bccache.Bucket, "write_bytecode", fail)
    env = jinja2.Environment(loader=jinja2.DictLoader({"t": "{{ x }}"}), bytecode_cache=cache.template_bytecode_cache())
    with caplog.at_level(logging.WARNING, logger="tilelang_tt"):
        assert env.get_template("t").render(x=1) == "1"
    assert "could not write the template cache" in caplog.text
    assert not [p for p in (disk_cache / "templates").iterdir()]      # no half-written file left


def test_artifact_write_failure_is_our_error(tmp_path, monkeypatch):
    def full(self, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(Path, "write_bytes", full)
    with pytest.raises(artifact.TTFileError, match="No space left on device") as info:
        artifact.write_artifact({"a.txt": "x"}, "k", root=tmp_path)
    assert isinstance(info.value, TTError) and isinstance(info.value, OSError)
    assert list(tmp_path.iterdir()) == []


# ---- CLI: one line, documented exit codes --------------------------------------------------------------------
@pytest.fixture(scope="module")
def add_dir():
    return _compile().artifact_dir


@pytest.fixture(scope="module")
def dynamic_dir():
    return _compile(K.dynamic_scale_add(N=64)).artifact_dir


def test_run_bad_seed_dim_and_out(add_dir, dynamic_dir, tmp_path, capsys):
    rc, _, err = _cli(capsys, "run", add_dir, "--seed", "-1", "--out", tmp_path / "o")
    assert rc == 2 and "--seed: -1 is negative" in _one_line_error(err)
    rc, _, err = _cli(capsys, "run", dynamic_dir, "--seed", "1", "--dim", "M=0", "--out", tmp_path / "o")
    assert rc == 2 and "symbolic dimension M=0 is below 1" in _one_line_error(err)
    rc, _, err = _cli(capsys, "run", dynamic_dir, "--seed", "1", "--dim", "K=3", "--out", tmp_path / "o")
    assert rc == 2 and "--dim K: the kernel has no symbolic dimension K (it has M)" in _one_line_error(err)
    (tmp_path / "file").write_text("x")
    rc, _, err = _cli(capsys, "run", add_dir, "--seed", "1", "--out", tmp_path / "file")
    assert rc == 2 and "--out" in _one_line_error(err) and "is a file, not a directory" in err
    assert (tmp_path / "file").read_text() == "x"


def test_run_empty_npy(add_dir, tmp_path, capsys):
    (tmp_path / "a.npy").write_bytes(b"")
    rc, _, err = _cli(capsys, "run", add_dir, "--input", f"A={tmp_path / 'a.npy'}", "--seed", "1",
                      "--out", tmp_path / "o")
    assert rc == 2 and "input A:" in _one_line_error(err) and "is not a .npy array" in err


def test_run_sanitizer_error_is_one_line_exit_1(add_dir, tmp_path, capsys):
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(add_dir, broken)
    reader = broken / "kernels" / "reader.cpp"
    reader.write_text("\n".join(line for line in reader.read_text().splitlines() if "cb_push_back" not in line))
    rc, _, err = _cli(capsys, "run", broken, "--seed", "1", "--out", tmp_path / "o")
    assert rc == cli.EXIT_FAILED == 1 and "deadlock" in _one_line_error(err)


def test_compile_of_a_module_that_raises(tmp_path, capsys):
    bad = tmp_path / "bad.py"
    bad.write_text("import math\n\nSCALE = 1 / 0\n")
    rc, _, err = _cli(capsys, "compile", f"{bad}:add", "--out", tmp_path / "o")
    assert rc == 2
    assert f"importing {bad} raised ZeroDivisionError: division by zero (bad.py, line 3)" in _one_line_error(err)
    maker = tmp_path / "maker.py"
    maker.write_text("def add():\n    raise RuntimeError('no kernel today')\n")
    rc, _, err = _cli(capsys, "compile", f"{maker}:add", "--out", tmp_path / "o")
    assert rc == 2 and "calling add() in" in _one_line_error(err) and "RuntimeError: no kernel today" in err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("argv, message", [
    (["run", "x"], "the following arguments are required: --out"),
    (["compile", "k.py:add", "--out", "o", "--max-cores", "0"], "0 is not a positive integer"),
    (["compile", "nope.py:add", "--out", "o"], "nope.py does not exist"),
    (["bogus"], "invalid choice"),
])
def test_usage_errors_are_one_line_exit_2(argv, message, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    rc, _, err = _cli(capsys, *argv)
    assert rc == 2 and message in _one_line_error(err)


def test_internal_error_is_one_line_exit_3(add_dir, tmp_path, monkeypatch, capsys):
    from tilelang_tt import run_artifact

    def boom(*args, **kwargs):
        raise RuntimeError("unexpected\nsecond line")

    monkeypatch.setattr(run_artifact, "run_artifact", boom)
    rc, _, err = _cli(capsys, "run", add_dir, "--seed", "1", "--out", tmp_path / "o")
    assert rc == cli.EXIT_INTERNAL == 3
    assert "internal error (a tilelang-tt bug" in _one_line_error(err)
    assert "RuntimeError: unexpected; second line" in err


def test_exit_codes_are_documented():
    docs = (Path(__file__).resolve().parents[2] / "docs" / "usage.md").read_text()
    section = docs[docs.index("### Exit status"):]
    for code in (cli.EXIT_OK, cli.EXIT_FAILED, cli.EXIT_INPUT, cli.EXIT_INTERNAL):
        assert f"| {code} |" in section


# ---- packages ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def package_bytes(tmp_path_factory):
    kernel = _compile()
    return kernel.export(tmp_path_factory.mktemp("pkg") / "add.ttpkg").read_bytes()


def _with_header(data: bytes, head: bytes) -> bytes:
    magic, version, head_len, _ = struct.unpack_from("<8sII32s", data)
    payload = data[48 + head_len:]
    return struct.pack("<8sII32s", magic, version, len(head), hashlib.sha256(head).digest()) + head + payload


@pytest.mark.parametrize("edit, message", [
    (lambda h: json.dumps({k: v for k, v in h.items() if k != "payload_bytes"}).encode(),
     "the header's 'payload_bytes' is missing, expected int"),
    (lambda h: json.dumps(dict(h, options="wormhole")).encode(), "the header's 'options' is a str, expected dict"),
    (lambda h: b"{not json", "the header is not JSON"),
    (lambda h: b"\xff\xfe", "the header is not JSON"),
    (lambda h: b"[1, 2]", "the header is a JSON list, not an object"),
], ids=["no_payload_bytes", "options_not_a_dict", "not_json", "not_utf8", "not_an_object"])
def test_malformed_package_headers(edit, message, package_bytes, tmp_path):
    _, _, head_len, _ = struct.unpack_from("<8sII32s", package_bytes)
    header = json.loads(package_bytes[48:48 + head_len])
    path = tmp_path / "bad.ttpkg"
    path.write_bytes(_with_header(package_bytes, edit(header)))
    with pytest.raises(TTPackageError, match=message):
        tilelang_tt.load(path)


def test_load_of_a_fifo_refuses_without_blocking(tmp_path):
    fifo = tmp_path / "k.ttpkg"
    os.mkfifo(fifo)
    outcome = []

    def load():
        try:
            tilelang_tt.load(fifo)
        except TTPackageError as err:
            outcome.append(str(err))

    t = threading.Thread(target=load, daemon=True)
    t.start()
    t.join(timeout=30)
    if t.is_alive():                         # unblock the reader before failing
        with open(fifo, "wb"):
            pass
        pytest.fail("tilelang_tt.load blocked on a FIFO")
    assert outcome and "is not a regular file" in outcome[0]


def test_artifact_directory_with_a_fifo_and_binary_build(add_dir, tmp_path):
    import shutil

    d = tmp_path / "art"
    shutil.copytree(add_dir, d)
    os.mkfifo(d / "kernels" / "pipe")
    (d / "build-hw-00").mkdir()
    (d / "build-hw-00" / "host").write_bytes(b"\x7fELF\xff\xfe")
    _, files = package.read_artifact(d)
    assert "kernels/pipe" not in files and not any(f.startswith("build-hw-") for f in files)
    (d / "notes.bin").write_bytes(b"\xff\xfe")
    with pytest.raises(TTPackageError, match="cannot read notes.bin as text"):
        package.read_artifact(d)


def test_npy_input_is_not_blocked_by_a_fifo(add_dir, tmp_path, capsys):
    os.mkfifo(tmp_path / "a.npy")
    rc, _, err = _cli(capsys, "run", add_dir, "--input", f"A={tmp_path / 'a.npy'}", "--seed", "1",
                      "--out", tmp_path / "o")
    assert rc == 2 and "is not a regular file" in _one_line_error(err)
