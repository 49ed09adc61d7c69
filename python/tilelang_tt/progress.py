"""Progress for long work (the real-header check, the examples harness, emulator runs over ~2 s): a tqdm bar or
spinner on stderr, shown only when stderr is a terminal, so captured output (pipes, files, tests) never holds one."""

from __future__ import annotations

import contextlib
import sys
import threading
import time

SPINNER_AFTER_S = 2.0     # an emulator run shows its spinner once it has taken this long


def enabled() -> bool:
    """Whether stderr is a terminal (progress is drawn there and nowhere else)."""
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):      # replaced by an object without isatty, or closed
        return False


def bar(iterable=None, *, show: bool = True, **kwargs):
    """``tqdm(iterable, **kwargs)`` on stderr; disabled (a plain pass-through) when stderr is not a terminal or
    ``show`` is False."""
    from tqdm import tqdm

    return tqdm(iterable, file=sys.stderr, disable=not (show and enabled()), dynamic_ncols=True, **kwargs)


@contextlib.contextmanager
def spinner(desc: str, after: float = SPINNER_AFTER_S):
    """Within the block, a spinner with the elapsed time on stderr once the block has run ``after`` seconds; it is
    erased when the block ends. Nothing at all when stderr is not a terminal."""
    if not enabled():
        yield
        return
    done = threading.Event()
    start = time.perf_counter()

    def show():
        if done.wait(after):
            return
        with bar(desc=desc, total=None, leave=False, bar_format="{desc}") as spin:
            while True:       # the time since the block began, not since the spinner appeared
                spin.set_description_str(f"{desc}: {time.perf_counter() - start:.0f} s", refresh=True)
                if done.wait(0.25):
                    break

    thread = threading.Thread(target=show, name="tilelang-tt-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
