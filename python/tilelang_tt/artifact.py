"""Artifact directories: written atomically (temp dir + rename), named by a content hash."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from pathlib import Path

ARTIFACT_ENV = "TILELANG_TT_ARTIFACT_DIR"
_SAFE = re.compile(r"[^A-Za-z0-9_]")


def safe_name(name: str) -> str:
    """An identifier safe for file names and C++: [A-Za-z0-9_], not starting with a digit."""
    text = _SAFE.sub("_", str(name)) or "kernel"
    return ("k_" + text) if text[0].isdigit() else text


def artifact_root() -> Path:
    root = os.environ.get(ARTIFACT_ENV)
    return Path(root) if root else Path.home() / ".cache" / "tilelang_tt" / "artifacts"


def content_hash(files: dict[str, str]) -> str:
    h = hashlib.sha256()
    for name in sorted(files):
        h.update(name.encode())
        h.update(b"\0")
        h.update(files[name].encode())
        h.update(b"\0")
    return h.hexdigest()


def write_artifact(files: dict[str, str], kernel_name: str, root: Path | None = None,
                   exact_dir: Path | None = None) -> Path:
    """Write ``files`` (relative path -> text) into ``root/<kernel>-<hash>`` (or ``exact_dir``) atomically.

    A reader never sees a half-written directory: everything goes to a temporary sibling first, which is
    renamed into place; if another process won the race with the same content, its copy is kept.
    """
    if exact_dir is not None:
        final = Path(exact_dir)
    else:
        root = Path(root) if root is not None else artifact_root()
        final = root / f"{safe_name(kernel_name)}-{content_hash(files)[:16]}"
    if exact_dir is None and final.is_dir():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    try:
        for rel, text in files.items():
            path = tmp / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        if exact_dir is not None and final.exists():
            old = final.with_name(f".{final.name}.old.{os.getpid()}")
            os.rename(final, old)
            os.rename(tmp, final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            try:
                os.rename(tmp, final)
            except OSError:
                if not final.is_dir():
                    raise
                shutil.rmtree(tmp, ignore_errors=True)  # an identical artifact landed first
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final
