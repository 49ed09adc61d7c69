"""The persistent compile cache: compiled TT artifacts shared across processes.

An entry is the artifact's files plus ``entry.json``, in ``<TileLang cache dir>/tt/kernels/<key>/`` (TileLang's
cache directory is ``$TILELANG_CACHE_DIR``, default ``~/.tilelang/cache``). The key is TileLang's own kernel-cache key
(the hash of the PrimFunc's script after TileLang's frontend, out_idx, target, target host, pass configs, compile
flags, TileLang's version and the platform) combined with tilelang-tt's version, a hash of the package's Python
sources, templates and schema (so any code change misses), the TT-Metalium SDK version and this entry format.

Entries are written atomically (a staged directory renamed into place), so concurrent compiles of one kernel
both succeed and readers never see half an entry. Every file's SHA-256 is recorded in ``entry.json`` and checked
on load; an entry that fails the check is logged, ignored and rebuilt.

Switches: TileLang's own (``TILELANG_DISABLE_CACHE=1``, ``tilelang.disable_cache()``) turn it off; so does
``TILELANG_TT_DUMP_IR`` (dumping the IR needs the passes to run).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
from functools import lru_cache
from pathlib import Path

from . import artifact as artifact_mod
from .sequence import SEQUENCE_FILE

logger = logging.getLogger(__name__)

SDK_VERSION = "0.81"          # the TT-Metalium release the generated code targets
ENTRY_FORMAT = 1
ENTRY_FILE = "entry.json"
FILES_DIR = "files"
SOURCE_FILE = "kernel_source.txt"     # the all-sources text TileLang keeps as the kernel source
_RACY_NS = 2_000_000_000        # files younger than this are always hashed (see fingerprint)
_FINGERPRINT_SUFFIXES = (".py", ".j2", ".json", ".hpp", ".h", ".cpp", ".txt")


def enabled() -> bool:
    """TileLang's cache switches, and no IR dump requested."""
    from tilelang import env

    return env.is_cache_enabled() and not os.environ.get("TILELANG_TT_DUMP_IR")


def cache_root() -> Path:
    """``<TileLang cache dir>/tt``."""
    from tilelang import env

    return artifact_mod.absolute(str(env.TILELANG_CACHE_DIR)) / "tt"


def entries_root() -> Path:
    return cache_root() / "kernels"


def template_bytecode_cache():
    """Jinja2's compiled-template cache in ``<TileLang cache dir>/tt/templates``: like ``__pycache__``, it only
    saves recompiling the templates in each process (~40 ms) and follows their source (Jinja2 checks a hash of
    each template), so it is used whatever the compile-cache switches say."""
    import jinja2

    class TolerantBytecodeCache(jinja2.FileSystemBytecodeCache):
        """A cache file that cannot be read back is recompiled, one that cannot be written (full disk, read-only
        directory) is logged: the cache never stops a compile."""

        def load_bytecode(self, bucket):
            try:
                super().load_bytecode(bucket)
            except (OSError, EOFError, ValueError, TypeError) as err:
                logger.warning("tilelang-tt: ignoring unreadable template cache file in %s (%s)", where, err)
                bucket.reset()

        def dump_bytecode(self, bucket):
            try:
                super().dump_bytecode(bucket)
            except OSError as err:
                logger.warning("tilelang-tt: could not write the template cache in %s (%s)", where, err)

    where = cache_root() / "templates"
    try:
        where.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        logger.warning("tilelang-tt: no template cache: cannot create %s (%s)", where, err)
        return None
    return TolerantBytecodeCache(str(where))


def _fingerprint_files(root: Path) -> list[tuple[str, str, os.stat_result]]:
    """(relative path, path, stat) of the fingerprinted files, sorted: one os.walk, pruning bytecode and the built
    emulator (``_sim/``); strings, not pathlib (~60 files on every cache hit)."""
    files = []
    top = str(root)
    for parent, dirs, names in os.walk(top):
        rel_parent = os.path.relpath(parent, top).replace(os.sep, "/")
        dirs[:] = [d for d in dirs if d != "__pycache__" and not (rel_parent == "." and d == "_sim")]
        for name in names:
            if name.endswith(_FINGERPRINT_SUFFIXES):
                path = os.path.join(parent, name)
                rel = name if rel_parent == "." else f"{rel_parent}/{name}"
                files.append((rel, path, os.stat(path)))
    return sorted(files, key=lambda f: f[0])


@lru_cache(maxsize=1)
def package_fingerprint() -> str:
    """SHA-256 of the package's sources, templates and schema (not of built binaries or bytecode).

    Hashing the ~60 files costs ~15 ms, most of a cache hit. As ``__pycache__`` does for bytecode, the digest is
    kept in ``<TileLang cache dir>/tt/fingerprint.json`` beside the files' (path, mtime_ns, size) signature, and
    reused while the signature matches; any edit, checkout or reinstall changes it and the files are hashed again.
    """
    return fingerprint(Path(__file__).resolve().parent, cache_root() / "fingerprint.json")


def fingerprint(root: Path, memo: Path) -> str:
    """SHA-256 of the fingerprinted files under ``root``, memoised in ``memo`` by their stat signature."""
    files = _fingerprint_files(root)
    stats = hashlib.sha256()
    newest = 0
    for rel, _, st in files:
        stats.update(f"{rel}\0{st.st_mtime_ns}\0{st.st_size}\0".encode())
        newest = max(newest, st.st_mtime_ns)
    signature = stats.hexdigest()
    # Git's "racy clean" rule: a file modified within the clock's granularity of now could be edited again without
    # its mtime changing, so while any file is that fresh the memo is neither trusted nor written.
    settled = time.time_ns() - newest > _RACY_NS
    try:
        known = json.loads(memo.read_text())
        if settled and known.get("signature") == signature and isinstance(known.get("sha256"), str):
            return known["sha256"]
    except (OSError, ValueError, AttributeError):
        pass
    h = hashlib.sha256()
    for rel, path, _ in files:
        with open(path, "rb") as f:
            h.update(rel.encode() + b"\0" + f.read() + b"\0")
    digest = h.hexdigest()
    if not settled:
        return digest
    tmp = memo.with_name(f".{memo.name}.{os.getpid()}.{threading.get_ident()}")
    try:
        memo.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps({"signature": signature, "sha256": digest}))
        os.replace(tmp, memo)        # atomic: a concurrent reader sees the old or the new memo, never half of one
    except OSError as err:
        logger.debug("tilelang-tt: could not record the package fingerprint (%s)", err)
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
    return digest


def versions() -> dict:
    import tilelang

    from .version import __version__

    return {"tilelang": str(tilelang.__version__), "tilelang_tt": __version__, "tilelang_tt_sources":
            package_fingerprint(), "sdk": SDK_VERSION, "entry_format": ENTRY_FORMAT}


def make_key(tilelang_key: str) -> str:
    """Our key: TileLang's kernel-cache key plus the versions above."""
    text = json.dumps({"tilelang_key": tilelang_key, **versions()}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


class Entry:
    """A cache entry read back: its key, the kernel name, the artifact files, the sources text, its directory.
    (A plain class: a dataclass compiles its generated methods when the module loads, ~1 ms of a cache hit.)"""

    def __init__(self, key: str, name: str, files: dict[str, str], source: str, path: Path):
        self.key, self.name, self.files, self.source, self.path = key, name, files, source, path


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def load(key: str) -> Entry | None:
    """The entry for ``key``, or None when absent or unusable (a bad entry is logged and set aside)."""
    path = entries_root() / key
    meta_path = path / ENTRY_FILE
    if not meta_path.is_file():
        if path.is_dir():       # entries land whole (staged, renamed): a directory without entry.json is damaged
            logger.warning("tilelang-tt: ignoring compile-cache entry %s without %s; recompiling", path, ENTRY_FILE)
            _discard(path)
        return None
    try:
        meta = json.loads(meta_path.read_text())
        if meta.get("format") != ENTRY_FORMAT or meta.get("key") != key:
            raise ValueError(f"format {meta.get('format')!r} / key {str(meta.get('key'))[:12]!r}")
        files = {}
        for rel, digest in meta["files"].items():
            text = (path / FILES_DIR / rel).read_text()
            if _sha(text) != digest:
                raise ValueError(f"{rel} does not match its recorded hash")
            files[rel] = text
        if "tt.plan.json" not in files and SEQUENCE_FILE not in files:
            raise ValueError("no tt.plan.json")
        source = (path / SOURCE_FILE).read_text()
        if _sha(source) != meta["source"]:
            raise ValueError(f"{SOURCE_FILE} does not match its recorded hash")
        return Entry(key, str(meta["name"]), files, source, path)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        logger.warning("tilelang-tt: ignoring corrupted compile-cache entry %s (%s); recompiling", path, err)
        _discard(path)
        return None


def _discard(path: Path) -> None:
    """Move a bad entry out of the way (atomically), then delete it."""
    import shutil

    trash = path.with_name(f".{path.name}.bad.{os.getpid()}.{threading.get_ident()}")
    try:
        os.rename(path, trash)
    except OSError:
        return
    shutil.rmtree(trash, ignore_errors=True)


def store(key: str, name: str, files: dict[str, str], source: str) -> Path | None:
    """Write an entry atomically; a failure to write (read-only or full disk) only logs."""
    final = entries_root() / key
    meta = {"format": ENTRY_FORMAT, "key": key, "name": name, "created": time.time(), **versions(),
            "files": {rel: _sha(text) for rel, text in files.items()}, "source": _sha(source)}
    try:
        with artifact_mod.staged_directory(final) as tmp:
            for rel, text in files.items():
                target = tmp / FILES_DIR / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text)
            (tmp / SOURCE_FILE).write_text(source)
            (tmp / ENTRY_FILE).write_text(json.dumps(meta, indent=1) + "\n")
    except OSError as err:
        logger.warning("tilelang-tt: could not write compile-cache entry %s (%s)", final, err)
        return None
    return final
