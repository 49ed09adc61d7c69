"""``tilelang-tt compile FILE.py:FUNC --out DIR [--arch ARCH] [--max-cores N]``: emit without executing.
``tilelang-tt check DIR``: check an artifact against the real TT-Metalium 0.81 SDK.
``tilelang-tt run DIR --out OUT [--input NAME=FILE.npy ...] [--seed N]``: run it on tt-sim (run_artifact.py).
``tilelang-tt model DIR [--protocol-run] [--json] [--trace OUT.json] [--svg OUT.svg]``: the performance model of an
artifact (perf_model.py); its per-core schedule as a Chrome/Perfetto trace and as a picture (trace.py).
``tilelang-tt inspect FILE_OR_DIR [--svg OUT.svg]``: a package's header and plan summary; the core map and the
CB/L1 layout drawn as SVG (inspect_view.py).
``tilelang-tt --version``: the version of tilelang-tt.

FUNC is a ``@T.prim_func`` in FILE, or a zero-argument callable returning one.

Every error is one ``error: ...`` line on stderr. Exit status: 0 done; 1 the command's verdict is a failure (the
compiler refused the kernel, the sanitizer stopped the run, the SDK check failed); 2 an unusable command line,
file, input or --out; 3 an internal error (a bug; $TILELANG_TT_TRACEBACK=1 prints the traceback); 130 interrupted.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path


EXIT_OK, EXIT_FAILED, EXIT_INPUT, EXIT_INTERNAL = 0, 1, 2, 3
TRACEBACK_ENV = "TILELANG_TT_TRACEBACK"     # =1: an internal error (exit 3) also prints its traceback


class InputError(Exception):
    """A command line, file or kernel module the CLI cannot use (exit 2)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):        # argparse's usage errors: one line, exit 2 (argparse's own code)
        print(f"error: {self.prog}: {message}", file=sys.stderr)
        raise SystemExit(EXIT_INPUT)


def one_line(text) -> str:
    """An error message on one line (a TTError's ``at`` and ``fix`` lines joined with ``; ``)."""
    return "; ".join(line.strip() for line in str(text).splitlines() if line.strip()) or type(text).__name__


def _fail(message, code: int) -> int:
    print(f"error: {one_line(message)}", file=sys.stderr)
    return code


def _raised(file: Path, err: BaseException) -> str:
    """``ZeroDivisionError: division by zero (k.py, line 3)``: the exception and the last line of ``file`` in it."""
    import traceback

    frames = [f for f in traceback.extract_tb(err.__traceback__) if Path(f.filename).resolve() == file.resolve()]
    where = f" ({file.name}, line {frames[-1].lineno})" if frames else ""
    return f"{type(err).__name__}: {one_line(err) if str(err) else '(no message)'}{where}"


def _load(spec: str):
    path, sep, name = spec.rpartition(":")
    if not sep or not path or not name:
        raise InputError(f"expected FILE.py:FUNC, got {spec!r}")
    file = Path(path)
    if not file.is_file():
        raise InputError(f"{file} does not exist" if not file.exists() else f"{file} is not a regular file")
    sys.path.insert(0, str(file.resolve().parent))
    try:
        mod_spec = importlib.util.spec_from_file_location(file.stem, file)
        module = importlib.util.module_from_spec(mod_spec)
        mod_spec.loader.exec_module(module)
    except (Exception, SystemExit) as err:
        raise InputError(f"importing {file} raised {_raised(file, err)}") from None
    if not hasattr(module, name):
        raise InputError(f"{file} has no {name!r}")
    obj = getattr(module, name)
    from tvm import tirx

    if not isinstance(obj, tirx.PrimFunc) and callable(obj):
        try:
            obj = obj()
        except (Exception, SystemExit) as err:
            raise InputError(f"calling {name}() in {file} raised {_raised(file, err)}") from None
    if not isinstance(obj, tirx.PrimFunc):
        raise InputError(f"{name} is not a T.prim_func (nor returns one)")
    return obj


def _integer_at_least(minimum: int, what: str):
    """An argparse type: an integer >= ``minimum`` (``what`` says what a smaller one is)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} {what}")
        return value
    return parse


def _parser() -> argparse.ArgumentParser:
    from tilelang_tt.version import __version__

    parser = _Parser(prog="tilelang-tt", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"tilelang-tt {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    comp = sub.add_parser("compile", help="compile a TileLang kernel for TT and write its artifact directory")
    comp.add_argument("kernel", help="FILE.py:FUNC")
    comp.add_argument("--out", required=True, type=Path,
                      help="artifact directory to write: new, empty, or one tilelang-tt wrote (never user files)")
    comp.add_argument("--arch", default="wormhole_b0", choices=["wormhole_b0", "blackhole"])
    comp.add_argument("--max-cores", type=_integer_at_least(1, "is not a positive integer"), default=None)
    chk = sub.add_parser("check", help="check an artifact against the real TT-Metalium 0.81 headers and library")
    chk.add_argument("artifact", type=Path, help="artifact directory (with tt.plan.json)")
    run = sub.add_parser("run", help="run an artifact on tt-sim (the CPU emulator) with inputs from .npy files")
    run.add_argument("artifact", type=Path, help="artifact directory (with tt.plan.json)")
    run.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy", help="an input tensor")
    run.add_argument("--seed", type=_integer_at_least(0, "is negative (seeds are integers >= 0)"), default=None,
                     help="seeded random values for inputs not given (normal; integer tensors: uniform)")
    run.add_argument("--dim", action="append", default=[], metavar="NAME=VALUE", help="a symbolic dimension")
    run.add_argument("--scalar", action="append", default=[], metavar="NAME=VALUE", help="a scalar kernel parameter")
    run.add_argument("--out", required=True, type=Path, help="directory for NAME.npy outputs and report.json")
    run.add_argument("--no-strict", dest="strict", action="store_false",
                     help="ask the emulator for its lenient mode (strict is the default)")
    mdl = sub.add_parser("model", help="print the performance model of an artifact (modeled, not measured)")
    mdl.add_argument("artifact", type=Path, help="artifact directory (with tt.plan.json)")
    mdl.add_argument("--protocol-run", action="store_true",
                     help="count with a protocol-only tt-sim run (zero inputs, no math) instead of the static walk")
    mdl.add_argument("--json", action="store_true", help="print the whole model as JSON")
    mdl.add_argument("--trace", type=Path, default=None, metavar="OUT.json",
                     help="write the modeled per-core schedule as a Chrome trace (open in ui.perfetto.dev): a new "
                          "file or one tilelang-tt wrote (never user files)")
    mdl.add_argument("--svg", type=Path, default=None, metavar="OUT.svg",
                     help="draw the modeled per-core schedule as SVG (same rule as --trace)")
    ins = sub.add_parser("inspect", help="summarise a package or artifact; draw its core map and L1 layout (SVG)")
    ins.add_argument("artifact", type=Path, help="package file (kernel.export) or artifact directory")
    ins.add_argument("--svg", type=Path, default=None, help="SVG to write (default: ./<kernel>.tt.svg)")
    return parser


def main(argv=None) -> int:
    """Run one command; the exit status is the module docstring's (and docs/usage.md "Exit status")."""
    args = _parser().parse_args(argv)
    commands = {"compile": _compile, "check": _check, "run": _run, "model": _model, "inspect": _inspect}
    try:
        return commands[args.command](args)
    except KeyboardInterrupt:
        return _fail("interrupted", 130)
    except InputError as err:
        return _fail(err, EXIT_INPUT)
    except OSError as err:       # TTFileError, and files the command could not read or write
        where = f"{err.filename}: " if getattr(err, "filename", None) else ""
        return _fail(f"{where}{err.strerror}" if err.strerror else err, EXIT_INPUT)
    except Exception as err:     # noqa: BLE001 - the one place a bug becomes a one-line error
        import os

        if os.environ.get(TRACEBACK_ENV) == "1":
            import traceback

            traceback.print_exc()
        return _fail(f"internal error (a tilelang-tt bug; {TRACEBACK_ENV}=1 prints the traceback): "
                     f"{type(err).__name__}: {err}", EXIT_INTERNAL)


def _compile(args) -> int:
    import tilelang_tt  # noqa: F401
    from tilelang_tt.artifact import check_output_dir, write_artifact
    from tilelang_tt.codegen import generate
    from tilelang_tt.errors import TTError
    from tilelang_tt.pipeline import lower_module
    from tilelang_tt.summary import plan_summary
    from tilelang_tt.target import make_options
    from tvm import IRModule

    check_output_dir(args.out)             # before compiling: --out must not hold files that are not ours
    func = _load(args.kernel)
    try:
        options = make_options(arch=args.arch, max_cores=args.max_cores, compile_only=True)
        mod = lower_module(IRModule({"main": func}), options)
        artifact = generate(mod["main"], options)
    except TTError as err:
        return _fail(err, EXIT_FAILED)
    out = write_artifact(artifact.files, artifact.name, exact_dir=args.out)
    print(plan_summary(artifact.plan))
    from tilelang_tt.perf_model import model_for_artifact, summary

    print(f"  {summary(model_for_artifact(out, artifact.plan))}")
    print(f"wrote {out}")
    return EXIT_OK


def _model(args) -> int:
    import json

    from tilelang_tt.errors import TTError
    from tilelang_tt.perf_model import StaticCountError, model_of, protocol_report, summary

    if not (args.artifact / "tt.plan.json").is_file():
        return _fail(f"{args.artifact} has no tt.plan.json", EXIT_INPUT)
    if args.trace is not None and args.svg is not None and args.trace.resolve() == args.svg.resolve():
        return _fail(f"--trace and --svg name the same file {args.trace}", EXIT_INPUT)
    from tilelang_tt.artifact import check_output_file, write_output_file

    for option, path in (("--trace", args.trace), ("--svg", args.svg)):
        if path is not None:
            check_output_file(path, option)       # before modeling: never a user's file
    try:
        plan = json.loads((args.artifact / "tt.plan.json").read_text())
        report = protocol_report(args.artifact, plan) if args.protocol_run else None
    except (TTError, StaticCountError) as err:
        return _fail(err, EXIT_FAILED)
    model = model_of(args.artifact, plan, report)
    if report is not None:
        model["run_report_total"] = report.get("total", {})
    print(json.dumps(model, indent=2) if args.json else summary(model))
    if "error" in model:
        return 1
    if args.trace is not None or args.svg is not None:
        from tilelang_tt import trace

        timeline = trace.trace_for_artifact(args.artifact, plan, report)
        if args.trace is not None:
            print(f"wrote {trace.write(timeline, args.trace)}")
        if args.svg is not None:
            print(f"wrote {write_output_file(args.svg, trace.render_svg(timeline), '--svg')}")
    return 0


def _inspect(args) -> int:
    from tilelang_tt.errors import TTError
    from tilelang_tt.inspect_view import inspect

    try:
        text, _ = inspect(args.artifact, args.svg)
    except TTError as err:
        return _fail(err, EXIT_INPUT)
    print(text)
    return 0


def _check(args) -> int:
    from tilelang_tt.realcheck import TTCheckError, check_artifact

    try:
        result = check_artifact(args.artifact)
    except TTCheckError as err:
        return _fail(err, EXIT_INPUT)
    print(result.summary())
    if not result.ok:
        return _fail(result.first_error(), EXIT_FAILED)
    print(f"all checks passed in {result.seconds:.2f} s")
    return 0


def _run(args) -> int:
    from tilelang_tt.errors import TTError
    from tilelang_tt.run_artifact import _pairs, run_artifact

    try:
        outcome = run_artifact(args.artifact, args.out, _pairs(args.input, "--input"), seed=args.seed,
                               dims=_pairs(args.dim, "--dim"), strict=args.strict,
                               scalars=_pairs(args.scalar, "--scalar"))
    except TTError as err:
        return _fail(err, EXIT_INPUT)
    if outcome.status != 0:
        return _fail(outcome.report["error"], outcome.status)
    total = outcome.report["report"].get("total", {})
    print(f"ran {outcome.report['kernel']} on tt-sim ({outcome.report['arch']}) in "
          f"{outcome.report['report'].get('wall_seconds', 0.0):.2f} s; {len(total)} counters in report.json")
    for name, path in outcome.report["outputs"].items():
        print(f"wrote {name}: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
