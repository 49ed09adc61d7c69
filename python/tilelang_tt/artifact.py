"""Artifact directories: written atomically (temp dir + rename), named by a content hash.

A directory under the artifact root is reused only while its files are the ones its name's hash was taken of; a
``--out`` directory (``exact_dir``) replaces only an empty directory or one tilelang-tt wrote there itself, as
recorded (each file's SHA-256) in ``<TILELANG_TT_CACHE_DIR>/out-dirs/``: user files are never deleted. A single
output file (``--trace``) is replaced under the same rule (``write_output_file``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import stat
import tempfile
import uuid
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

from .errors import TTError

logger = logging.getLogger(__name__)

ARTIFACT_ENV = "TILELANG_TT_ARTIFACT_DIR"
CACHE_ENV = "TILELANG_TT_CACHE_DIR"
RECORDS_DIR = "out-dirs"
_HW_BUILD_PREFIX = "build-hw-"       # hardware.build_host's CMake build directories inside an artifact


class TTFileError(TTError, OSError):
    """A file or directory tilelang-tt cannot write, or will not replace because it did not write it."""
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
McastGroup make_mcast_group mcast_addr semaphore_ptr kSemInvalid kSemValid sender last TilePart tile_part read_half
for_each_face_row_segment McastRoute noc_routes mcast bfloat16_bits float16_bits float_bits
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


@lru_cache(maxsize=None)
def absolute(raw: str) -> Path:
    """An environment variable's path made absolute once per value: a relative one is resolved against the
    working directory of its first use, so a later ``chdir`` (the emulator runs inside the artifact) keeps it."""
    return Path(os.path.abspath(os.path.expanduser(raw)))


def env_dir(name: str, default: Path) -> Path:
    raw = os.environ.get(name)
    return absolute(raw) if raw else default


def artifact_root() -> Path:
    return env_dir(ARTIFACT_ENV, Path.home() / ".cache" / "tilelang_tt" / "artifacts")


def tt_cache_root() -> Path:
    """``$TILELANG_TT_CACHE_DIR`` (default ``~/.cache/tilelang_tt``): emulator builds, ``--out`` records."""
    return env_dir(CACHE_ENV, Path.home() / ".cache" / "tilelang_tt")


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
    Temporary names are unique per process and thread (``mkdtemp``, a random suffix).
    """
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    old = None
    try:
        yield tmp
        if replace and final.exists():
            old = final.with_name(f".{final.name}.old.{os.getpid()}.{uuid.uuid4().hex[:12]}")
            try:
                os.rename(final, old)
            except FileNotFoundError:       # another process replaced it first
                old = None
        try:
            os.rename(tmp, final)
        except OSError:
            if not final.is_dir():
                raise
            shutil.rmtree(tmp, ignore_errors=True)   # an identical directory landed first
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None and not final.exists():
            try:
                os.rename(old, final)        # put the replaced directory back: nothing is lost
            except OSError:
                pass
        raise


def write_artifact(files: dict[str, str], kernel_name: str, root: Path | None = None,
                   exact_dir: Path | None = None) -> Path:
    """Write ``files`` (relative path -> text) into ``root/<kernel>-<hash>`` (or ``exact_dir``) atomically.

    An existing ``<kernel>-<hash>`` directory is reused only if it still holds exactly ``files`` (it is rewritten
    otherwise); ``exact_dir`` must be new, empty, or an artifact tilelang-tt wrote there (:func:`check_output_dir`).
    Failures to write are :class:`TTFileError` (an ``OSError``)."""
    if exact_dir is not None:
        final = Path(os.path.abspath(exact_dir))
        check_output_dir(final)
        _stage(final, files, replace=True)
        _record_output(final, files)
        return Path(exact_dir)
    root = Path(root) if root is not None else artifact_root()
    final = root / f"{safe_name(kernel_name)}-{content_hash(files)[:16]}"
    replace = final.is_dir()
    if replace and holds(final, files):
        return final
    if replace:
        logger.warning("tilelang-tt: %s was changed after it was written (its files are not the ones its name's "
                       "hash was taken of); rewriting it", final)
    _stage(final, files, replace=replace)
    return final


def holds(directory: Path, files: dict[str, str]) -> bool:
    """Whether ``directory`` holds exactly the text of every file in ``files`` (other files are not looked at)."""
    try:
        return all((directory / rel).read_bytes() == text.encode() for rel, text in files.items())
    except OSError:
        return False


def _stage(final: Path, files: dict[str, str], replace: bool) -> None:
    try:
        with staged_directory(final, replace=replace) as tmp:
            for rel, text in files.items():
                path = tmp / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(text.encode())
    except OSError as err:
        raise TTFileError(f"cannot write {final}: {err.strerror or err}", construct="artifact directory",
                          fix=f"free space or point ${ARTIFACT_ENV} (or --out) at a writable directory") from err


# ---- --out directories: replaced only when tilelang-tt wrote them ---------------------------------------------
def _sha_file(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _record_path(final: Path) -> Path:
    key = hashlib.sha256(os.path.realpath(final).encode()).hexdigest()[:32]
    return tt_cache_root() / RECORDS_DIR / f"{key}.json"


def _record_output(final: Path, files: dict[str, str]) -> None:
    """Remember what was written at ``final`` (each file's SHA-256), so a later ``--out`` may replace it."""
    _write_record(final, {"path": os.path.realpath(final),
                          "files": {rel: hashlib.sha256(text.encode()).hexdigest() for rel, text in files.items()}},
                  "--out")


def _write_record(final: Path, record: dict, what: str) -> None:
    where = _record_path(final)
    try:
        where.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{where.name}.", dir=where.parent)
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(record))
        os.replace(tmp, where)
    except OSError as err:
        logger.warning("tilelang-tt: could not record %s as written by tilelang-tt (%s); a later %s onto it "
                       "will refuse to replace it", final, err, what)


def _recorded(final: Path, key: str, kind: type):
    """The record's ``key`` (``files`` of a directory, ``file`` of a single file) for ``final``, or None."""
    try:
        record = json.loads(_record_path(final).read_text())
    except (OSError, ValueError):
        return None
    ok = isinstance(record, dict) and record.get("path") == os.path.realpath(final)
    return record[key] if ok and isinstance(record.get(key), kind) else None


def _recorded_files(final: Path) -> dict | None:
    return _recorded(final, "files", dict)


def _tree(final: Path) -> tuple[dict[str, str], list[str]]:
    """(relative path -> path of each regular file, relative paths of anything else) under ``final``; the CMake
    build directories of ``hardware.build_host`` (``build-hw-*``) are ours and skipped."""
    regular, other = {}, []
    for parent, dirs, names in os.walk(final):
        rel_parent = os.path.relpath(parent, final).replace(os.sep, "/")
        prefix = "" if rel_parent == "." else rel_parent + "/"
        if not prefix:
            dirs[:] = [d for d in dirs if not d.startswith(_HW_BUILD_PREFIX)]
        other += [prefix + d for d in dirs if os.path.islink(os.path.join(parent, d))]
        for name in names:
            path = os.path.join(parent, name)
            if stat.S_ISREG(os.lstat(path).st_mode):
                regular[prefix + name] = path
            else:
                other.append(prefix + name)      # a symbolic link, FIFO, socket or device: never ours
    return regular, other


def _foreign(final: Path) -> str | None:
    """Why the directory ``final`` is not (only) an artifact tilelang-tt wrote there, or None."""
    regular, other = _tree(final)
    if not regular and not other:
        return None
    recorded = _recorded_files(final)
    if recorded is None:
        shown = sorted(regular) + sorted(other)
        listed = ", ".join(shown[:3]) + (", ..." if len(shown) > 3 else "")
        return f"is a non-empty directory that tilelang-tt did not write (it holds {listed})"
    if other:
        return f"holds {other[0]}, which tilelang-tt did not write"
    for rel, path in sorted(regular.items()):
        if rel not in recorded:
            return f"holds {rel}, which tilelang-tt did not write"
        if _sha_file(path) != recorded[rel]:
            return f"holds {rel}, changed after tilelang-tt wrote it"
    return None


def check_output_dir(final: Path) -> None:
    """Refuse (``TTFileError``) an output directory that would lose files: a file, a symbolic link, or a
    non-empty directory that is not an unchanged artifact tilelang-tt wrote at that path."""
    final = Path(final)
    if final.is_symlink():
        problem = "is a symbolic link"
    elif final.exists() and not final.is_dir():
        problem = "is a file, not a directory"
    else:
        problem = _foreign(final) if final.exists() else None
    if problem:
        raise TTFileError(f"{final} {problem}; refusing to replace it", construct="--out",
                          fix="pass a new or empty directory, or move this one away")


# ---- single output files (a trace, a picture): replaced only when tilelang-tt wrote them ----------------------
def check_output_file(path: Path, what: str) -> None:
    """Refuse (``TTFileError``) an output file path that would lose a file: a symbolic link, a directory, or an
    existing file that is not one tilelang-tt wrote there, unchanged since (recorded, as ``--out`` directories
    are). ``what`` names the option or call in messages (``--trace``)."""
    final = Path(os.path.abspath(path))
    problem = None
    if final.is_symlink():
        problem = "is a symbolic link"
    elif final.is_dir():
        problem = "is a directory"
    elif final.exists():
        recorded = _recorded(final, "file", str)    # SHA-256 of what we wrote
        if not final.is_file():
            problem = "is not a regular file"
        elif recorded != _sha_file(str(final)):
            problem = ("is a file that tilelang-tt did not write" if recorded is None
                       else "was changed after tilelang-tt wrote it")
    if problem:
        raise TTFileError(f"{path} {problem}; refusing to replace it", construct=what,
                          fix="pass a new file name, or move this file away")


def write_output_file(path: Path, text: str, what: str) -> Path:
    """Write ``text`` to the file ``path`` atomically (a temporary sibling renamed into place), if
    ``check_output_file`` allows; a path that cannot be written is a ``TTFileError`` too."""
    check_output_file(path, what)
    final = Path(os.path.abspath(path))
    data = text.encode()
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{final.name}.", dir=final.parent)
    except OSError as err:
        raise TTFileError(f"cannot write {path}: {err.strerror or err}", construct=what,
                          fix="pass a path in a writable directory") from err
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, final)
    except OSError as err:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise TTFileError(f"cannot write {path}: {err.strerror or err}", construct=what,
                          fix="free space, or pass a path in a writable directory") from err
    _write_record(final, {"path": os.path.realpath(final), "file": hashlib.sha256(data).hexdigest()}, what)
    return Path(path)


class StoredArtifact:
    """An artifact read back from the compile cache or a package: the files, the plan, where the files were
    written, and the all-sources text ``codegen.Artifact.source()`` gave when it was compiled. (A plain class: a
    dataclass compiles its generated methods when the module loads, ~1 ms of a cache hit.)"""

    def __init__(self, name: str, files: dict[str, str], plan: dict, directory: Path | None, source_text: str):
        self.name, self.files, self.plan, self.directory, self.source_text = name, files, plan, directory, source_text

    def source(self) -> str:
        return self.source_text
