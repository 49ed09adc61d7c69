"""The persistent compile cache (tilelang_tt/cache.py): shared across processes, keyed, self-checking."""

import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import tilelang

from examples import kernels as K
from tilelang_tt import cache
from tilelang_tt.runtime import TTKernelCache

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def cache_dir(tmp_path, monkeypatch, artifact_root):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "tlcache"))
    monkeypatch.delenv("TILELANG_DISABLE_CACHE", raising=False)
    monkeypatch.delenv("TILELANG_TT_DUMP_IR", raising=False)
    TTKernelCache()._memory_cache.clear()      # every compile below reaches the disk cache
    yield tmp_path / "tlcache" / "tt" / "kernels"
    TTKernelCache()._memory_cache.clear()


def _compile(func, target="tt"):
    kernel = tilelang.compile(func, target=target)
    TTKernelCache()._memory_cache.clear()
    return kernel


def test_second_process_hits_and_runs(tmp_path):
    script = (
        "import sys, json; sys.path.insert(0, sys.argv[1])\n"
        "import tilelang, tilelang_tt, torch\n"
        "from examples import kernels as K\n"
        "k = tilelang.compile(K.elementwise_add(64, 64, 'float32'), target='tt')\n"
        "out = {'cache': k.compile_info['cache'], 'dir': str(k.artifact_dir), 'src': k.get_kernel_source()}\n"
        "if sys.argv[2] == 'run':\n"
        "    a, b = torch.randn(64, 64), torch.randn(64, 64)\n"
        "    c = torch.empty(64, 64)\n"
        "    k(a, b, c)\n"
        "    out['err'] = float((c - (a + b)).abs().max())\n"
        "print(json.dumps(out))\n")
    env = {"TILELANG_CACHE_DIR": str(tmp_path / "tlcache"), "TILELANG_TT_ARTIFACT_DIR": str(tmp_path / "art"),
           "TILELANG_TT_CACHE_DIR": str(tmp_path / "ttcache"), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    results = []
    for mode in ("compile", "run"):
        proc = subprocess.run([sys.executable, "-c", script, str(ROOT), mode], capture_output=True, text=True,
                              env=env, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    first, second = results
    assert (first["cache"], second["cache"]) == ("miss", "hit")
    assert first["src"] == second["src"] and first["dir"] == second["dir"]
    assert second["err"] < 1e-6
    assert len(list((tmp_path / "tlcache" / "tt" / "kernels").iterdir())) == 1
    assert list((tmp_path / "tlcache" / "tt" / "templates").iterdir())       # compiled Jinja2 templates


def test_changed_kernel_or_option_misses(cache_dir):
    assert _compile(K.elementwise_add(64, 64)).compile_info["cache"] == "miss"
    assert _compile(K.elementwise_add(64, 64)).compile_info["cache"] == "hit"
    assert _compile(K.elementwise_add(64, 96)).compile_info["cache"] == "miss"            # kernel changed
    assert _compile(K.elementwise_add(64, 64), "tt -max_cores=2").compile_info["cache"] == "miss"   # option
    assert _compile(K.elementwise_add(64, 64), "tt -arch=blackhole").compile_info["cache"] == "miss"  # arch
    assert len(list(cache_dir.iterdir())) == 4


def test_key_covers_versions_and_sources(monkeypatch):
    base = cache.make_key("k")
    monkeypatch.setattr(cache, "package_fingerprint", lambda: "changed sources")
    assert cache.make_key("k") != base
    monkeypatch.undo()
    monkeypatch.setattr(cache, "SDK_VERSION", "0.82")
    assert cache.make_key("k") != base
    assert cache.make_key("other") != cache.make_key("k")


def test_source_fingerprint_follows_every_edit(tmp_path):
    """The fingerprint is memoised by the files' stat signature; an edit (content, size or mtime) rehashes, and
    files too fresh for their mtime to be trusted are always hashed."""
    src, memo = tmp_path / "pkg", tmp_path / "memo.json"
    (src / "templates").mkdir(parents=True)
    files = {src / "a.py": "x = 1\n", src / "templates" / "k.cpp.j2": "{{ x }}\n"}
    (src / "notes.bin").write_bytes(b"not fingerprinted")

    def write(path, text, age_s=60):
        path.write_text(text)
        when = time.time_ns() - age_s * 10**9
        os.utime(path, ns=(when, when))

    for path, text in files.items():
        write(path, text)
    first = cache.fingerprint(src, memo)
    assert json.loads(memo.read_text())["sha256"] == first
    # A memo whose signature matches is trusted (that is what makes a hit cheap) ...
    memo.write_text(json.dumps({**json.loads(memo.read_text()), "sha256": "memoised"}))
    assert cache.fingerprint(src, memo) == "memoised"
    # ... any edit of a fingerprinted file invalidates it, one that keeps the size too ...
    write(src / "a.py", "x = 2\n", age_s=30)
    second = cache.fingerprint(src, memo)
    assert second not in (first, "memoised")
    write(src / "templates" / "k.cpp.j2", "{{ y }}\n", age_s=20)
    third = cache.fingerprint(src, memo)
    assert third not in (first, second)
    assert cache.fingerprint(src, tmp_path / "fresh.json") == third
    (src / "notes.bin").write_bytes(b"other bytes")              # not a fingerprinted suffix
    assert cache.fingerprint(src, memo) == third
    # ... and a file written just now is hashed whatever the memo says (its next edit may keep the mtime).
    write(src / "a.py", "x = 3\n", age_s=0)
    memo.write_text(json.dumps({"signature": "any", "sha256": "memoised"}))
    fresh = cache.fingerprint(src, memo)
    assert fresh not in (first, second, third, "memoised")
    assert json.loads(memo.read_text())["sha256"] == "memoised"          # not recorded while racy


@pytest.mark.parametrize("damage", ["edit_kernel", "truncate_entry", "delete_plan", "edit_source"])
def test_corrupted_entry_is_ignored_and_rebuilt(cache_dir, caplog, damage):
    first = _compile(K.elementwise_add(64, 64))
    entry = Path(first.compile_info["path"])
    good = first.get_kernel_source()
    if damage == "edit_kernel":
        path = entry / cache.FILES_DIR / "kernels" / "compute.cpp"
        path.write_text(path.read_text() + "// edited after the compile\n")
    elif damage == "truncate_entry":
        path = entry / cache.ENTRY_FILE
        path.write_text(path.read_text()[:40])
    elif damage == "delete_plan":
        (entry / cache.FILES_DIR / "tt.plan.json").unlink()
    else:
        (entry / cache.SOURCE_FILE).write_text("// nothing\n")
    with caplog.at_level(logging.WARNING, logger="tilelang_tt.cache"):
        second = _compile(K.elementwise_add(64, 64))
    assert second.compile_info["cache"] == "miss"
    assert "corrupted compile-cache entry" in caplog.text
    assert second.get_kernel_source() == good
    third = _compile(K.elementwise_add(64, 64))
    assert third.compile_info["cache"] == "hit" and third.get_kernel_source() == good
    assert [p.name for p in cache_dir.iterdir()] == [entry.name]      # nothing else left behind


def test_tilelang_switches_disable_it(cache_dir, monkeypatch):
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    assert _compile(K.elementwise_add(64, 64)).compile_info["cache"] == "off"
    monkeypatch.delenv("TILELANG_DISABLE_CACHE")
    tilelang.disable_cache()
    try:
        assert _compile(K.elementwise_add(64, 64)).compile_info["cache"] == "off"
    finally:
        tilelang.enable_cache()
    assert not cache_dir.exists() or not list(cache_dir.iterdir())


def test_ir_dump_bypasses_it(cache_dir, monkeypatch, tmp_path):
    _compile(K.elementwise_add(64, 64))
    monkeypatch.setenv("TILELANG_TT_DUMP_IR", str(tmp_path / "dump"))
    assert _compile(K.elementwise_add(64, 64)).compile_info["cache"] == "off"
    assert (tmp_path / "dump" / "add").is_dir()


def test_entry_lives_beside_tilelang_cache(cache_dir):
    kernel = _compile(K.elementwise_add(64, 64))
    assert Path(kernel.compile_info["path"]).parent == cache_dir
    meta = json.loads((Path(kernel.compile_info["path"]) / cache.ENTRY_FILE).read_text())
    assert meta["sdk"] == cache.SDK_VERSION and meta["tilelang"] == tilelang.__version__
