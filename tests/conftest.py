import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

os.environ.setdefault("TILELANG_TT_ARTIFACT_DIR", str(ROOT / "build" / "test-artifacts"))

import tilelang  # noqa: E402,F401
import tilelang_tt  # noqa: E402,F401


@pytest.fixture
def artifact_root(tmp_path, monkeypatch):
    root = tmp_path / "artifacts"
    monkeypatch.setenv("TILELANG_TT_ARTIFACT_DIR", str(root))
    return root
