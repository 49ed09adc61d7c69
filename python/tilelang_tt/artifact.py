"""Artifact directories: written atomically (temp dir + rename), named by a content hash."""

from __future__ import annotations

import hashlib
import os
from contextlib import contextmanager
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


# Identifiers generated code uses itself, and C++ keywords: a user name equal to one of them gets a suffix.
RESERVED = frozenset("""
alignas alignof and asm auto bool break case catch char class const constexpr const_cast continue decltype default
delete do double dynamic_cast else enum explicit export extern false float for friend goto if inline int long
mutable namespace new noexcept not nullptr operator or private protected public register reinterpret_cast return
short signed sizeof static static_assert static_cast struct switch template this throw true try typedef typeid
typename union unsigned using virtual void volatile while xor main kernel_main std tt uint8_t uint16_t uint32_t
uint64_t int32_t size_t count start_id first_id rect_y rect_x rect_w n r c i h w sb sm sn mt nt kt cb grid tensor
block_id band band_h in_band group group_w in_group zeros mesh cq program cores reader writer compute
workload work core data_dir artifact_dir argc argv kCoreWork CoreWork read_tensor write_tensor TileGrid
read_tiles write_tiles zero_tile_tail read_tile_block write_tile_block read_tile_part generate_reduce_scaler row
McastGroup make_mcast_group mcast_addr read_tiles_mcast kSemInvalid kSemValid sender last
""".split())


def unique_names(names) -> dict[str, str]:
    """``safe_name`` of each name, made unique (``x``, ``x_2``, ...) and distinct from generated identifiers
    and C++ keywords, so distinct user names never collide in C++."""
    out, used = {}, set(RESERVED)
    for name in names:
        base = safe_name(name)
        if base in RESERVED:
            base += "_t"
        candidate, i = base, 2
        while candidate in used:
            candidate, i = f"{base}_{i}", i + 1
        used.add(candidate)
        out[name] = candidate
    return out


def comment_text(text: str) -> str:
    """Text that is safe inside a C++ ``//`` comment: one line, printable, no line-continuation backslash."""
    cleaned = "".join(ch if (ch.isascii() and ch.isprintable()) else "?" for ch in str(text))
    return cleaned.replace("\\", "/").replace("*/", "* /")


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


@contextmanager
def staged_directory(final: Path, replace: bool = False):
    """Build a directory atomically: yield a temporary sibling of ``final`` to fill, then rename it into place.

    Readers never see a half-built directory. If ``final`` appeared meanwhile (another process built the same
    content), that copy is kept, unless ``replace`` is set. On any error the temporary directory is removed.
    """
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    try:
        yield tmp
        if replace and final.exists():
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
                shutil.rmtree(tmp, ignore_errors=True)   # an identical directory landed first
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_artifact(files: dict[str, str], kernel_name: str, root: Path | None = None,
                   exact_dir: Path | None = None) -> Path:
    """Write ``files`` (relative path -> text) into ``root/<kernel>-<hash>`` (or ``exact_dir``) atomically."""
    if exact_dir is not None:
        final = Path(exact_dir)
    else:
        root = Path(root) if root is not None else artifact_root()
        final = root / f"{safe_name(kernel_name)}-{content_hash(files)[:16]}"
        if final.is_dir():
            return final
    with staged_directory(final, replace=exact_dir is not None) as tmp:
        for rel, text in files.items():
            path = tmp / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    return final


class StoredArtifact:
    """An artifact read back from the compile cache or a package: the files, the plan, where the files were
    written, and the all-sources text ``codegen.Artifact.source()`` gave when it was compiled. (A plain class: a
    dataclass compiles its generated methods when the module loads, ~1 ms of a cache hit.)"""

    def __init__(self, name: str, files: dict[str, str], plan: dict, directory: Path | None, source_text: str):
        self.name, self.files, self.plan, self.directory, self.source_text = name, files, plan, directory, source_text

    def source(self) -> str:
        return self.source_text
