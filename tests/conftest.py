import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

os.environ.setdefault("TILELANG_TT_ARTIFACT_DIR", str(ROOT / "build" / "test-artifacts"))

import tilelang  # noqa: E402,F401
import tilelang_tt  # noqa: E402,F401
import tilelang_tt.artifact as _artifact  # noqa: E402
import tilelang_tt.codegen as _codegen  # noqa: E402
from tilelang_tt import plan as _plan_mod  # noqa: E402

# Every artifact the suite writes is checked against the real TT-Metalium 0.81 headers and libtt_metal.so at
# the end of the session (set TILELANG_TT_REAL_CHECK=0 to skip this while iterating locally).
_WRITTEN: set[Path] = set()
_original_write = _artifact.write_artifact


def _recording_write(files, kernel_name, root=None, exact_dir=None):
    # The compiler checks only the plan's invariants; every plan the suite writes is also checked against the
    # JSON Schema here (a violation fails the compile that wrote it).
    for rel, text in files.items():     # a kernel of several launches has one plan per launch, in its directory
        if rel.split("/")[-1] != "tt.plan.json":
            continue
        plan = json.loads(text)
        if isinstance(plan, dict) and "schema_version" in plan:      # not the hygiene tests' toy files
            _plan_mod.validate(plan)
    out = _original_write(files, kernel_name, root=root, exact_dir=exact_dir)
    _WRITTEN.add(Path(out))
    return out


_artifact.write_artifact = _recording_write
_codegen.write_artifact = _recording_write


@pytest.fixture(autouse=True)
def _seeded_torch(request):
    """Every test draws the same random inputs on every run and under any worker split: an error bound that
    holds for one draw and not another is found once, by whoever changes the test, not by CI at random."""
    import zlib

    import torch

    torch.manual_seed(zlib.crc32(request.node.nodeid.encode()))


@pytest.fixture
def artifact_root(tmp_path, monkeypatch):
    root = tmp_path / "artifacts"
    monkeypatch.setenv("TILELANG_TT_ARTIFACT_DIR", str(root))
    return root


# Under pytest-xdist (./test.sh runs a worker per core) each worker hands the artifacts it wrote to the controller
# through files in one directory; the controller checks them all once, after every worker finished.
_HANDOFF: list[str] = []


def pytest_configure(config):
    if not hasattr(config, "workerinput"):
        import tempfile

        _HANDOFF.append(tempfile.mkdtemp(prefix="tilelang-tt-written-"))


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    node.workerinput["tt_written_dir"] = _HANDOFF[0]


def _handed_off() -> set[Path]:
    import shutil

    folder = Path(_HANDOFF[0])
    found = {Path(line) for f in folder.glob("*.txt") for line in f.read_text().splitlines() if line}
    shutil.rmtree(folder, ignore_errors=True)
    return found


def pytest_sessionfinish(session, exitstatus):
    workerinput = getattr(session.config, "workerinput", None)
    if workerinput is not None:
        folder = Path(workerinput["tt_written_dir"])
        (folder / f"{workerinput['workerid']}.txt").write_text("".join(f"{d}\n" for d in sorted(_WRITTEN)))
        return
    _WRITTEN.update(_handed_off())
    if os.environ.get("TILELANG_TT_REAL_CHECK", "1") == "0" or not _WRITTEN:
        return
    from concurrent.futures import ThreadPoolExecutor

    from tilelang_tt.realcheck import check_artifact

    import json

    from tilelang_tt import plan as plan_mod

    def is_real(d: Path) -> bool:   # the hygiene tests write toy files that are not TT artifacts
        try:
            plan_mod.validate(json.loads((d / "tt.plan.json").read_text()))
            return True
        except Exception:
            return False

    def launches(d: Path) -> list[Path]:   # a kernel of several T.Kernel launches: each launch's artifact
        seq = d / "tt.sequence.json"
        return [d / s["dir"] for s in json.loads(seq.read_text())["stages"]] if seq.is_file() else [d]

    dirs = sorted({s for d in _WRITTEN for s in launches(d) if (s / "tt.plan.json").is_file() and is_real(s)})
    with ThreadPoolExecutor(max_workers=max(1, (os.cpu_count() or 2) // 2)) as pool:
        results = list(pool.map(lambda d: check_artifact(d, jobs=2), dirs))
    failed = [r for r in results if not r.ok]
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    line = (f"real TT-Metalium 0.81 check: {len(results) - len(failed)} of {len(results)} generated artifacts pass "
            f"(kernels through the real firmware wrappers, host APIs against libtt_metal.so)")
    if reporter is not None:
        reporter.write_line(line)
        for r in failed:
            reporter.write_line(f"FAILED {r.artifact}: {r.first_error()}")
    if failed:
        session.exitstatus = 1
