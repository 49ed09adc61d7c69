"""Exceptions raised by tilelang-tt.

Every error a user can trigger is a :class:`TTError`. Its message names the construct, the limit and
the actual value, suggests a fix, and carries the TileLang source line when one is known, so that a
bad kernel never surfaces as a TVM internal traceback.
"""


class TTError(Exception):
    """Base class of every tilelang-tt error."""

    def __init__(self, message: str, *, construct: str | None = None, fix: str | None = None,
                 source: str | None = None):
        # plain str: TVM strings (names, scripts) reach here and must survive pickling (worker processes)
        construct, fix, source = (None if v is None else str(v) for v in (construct, fix, source))
        self.construct = construct
        self.fix = fix
        self.source = source
        # a message that opens with its construct (the lowering's ``f"{what}: ..."``) names it once
        parts = [f"{construct}: {message}" if construct and not message.startswith(f"{construct}:") else message]
        if source:
            parts.append(f"  at {source}")
        if fix:
            parts.append(f"  fix: {fix}")
        super().__init__("\n".join(parts))


class TTTargetError(TTError, ValueError):
    """A bad ``target="tt ..."`` string or dict."""


class TTAnnotationError(TTError, ValueError):
    """A malformed ``T.annotate_tt_schedule`` / ``T.annotate_tt_sharding`` / ``T.TTShard``."""


class TTScheduleError(TTError):
    """A static schedule that does not cover every block exactly once or does not fit the device."""


class TTShapeError(TTError):
    """A tensor or block extent the TT backend cannot tile (for now: not a multiple of 32)."""


class TTUnsupportedError(TTError):
    """A TileLang construct the TT backend cannot lower."""


class TTResourceError(TTUnsupportedError):
    """The kernel's blocks need more of a core's resources (L1) than it has."""


class TTLoweringError(TTError):
    """A pass found IR it must handle but whose shape it does not recognise."""


class TTPlanError(TTError):
    """The generated ``tt.plan.json`` violates its schema (an internal consistency check)."""


class TTVersionError(TTError, ImportError):
    """The installed TileLang is not a version this plugin was built against."""


class TTVerifyError(TTError):
    """A compiler bug: the generated TT program breaks a rule of the verifier (``transform/verify_program.py``)."""

    def __init__(self, rule: str, message: str, *, kernel: str, op: str, source: str | None = None,
                 note: str | None = None):
        self.rule = rule
        self.kernel = kernel
        super().__init__(f"[{rule}] {message}" + (f" (TileLang: {note})" if note else ""),
                         construct=f"internal error in the {kernel} kernel at {op}", source=source,
                         fix="this is a tilelang-tt bug; please report it with the kernel")


class TTPackageError(TTError):
    """A packaged artifact (``kernel.export`` / ``tilelang_tt.load``) that is corrupted, truncated, of another
    format version or SDK, or whose content does not match its recorded hash."""


class TTCallError(TTError, ValueError):
    """A call of a compiled kernel with an argument that does not fit its parameter (count, type, dtype, device,
    shape, writability, scalar range). A ValueError, as TileLang's adapters raise for a bad argument."""


class TTPrecisionWarning(UserWarning):
    """A compiled kernel computes less exactly than its dtypes say and the user did not choose it: T.gemm operand
    bits the FPU does not multiply, float16 results packed through bfloat16 (the plan's ``precision``;
    docs/usage.md, Precision)."""
