"""``tilelang-tt compile FILE.py:FUNC --out DIR [--arg NAME=VALUE ...] [--target TARGET] [--arch ARCH]
[--max-cores N]``: emit without executing.
``tilelang-tt check ARTIFACT [ARTIFACT ...]``: check artifacts against the real TT-Metalium 0.81 SDK.
``tilelang-tt run ARTIFACT --out OUT [--input NAME=FILE.npy ...] [--seed N]``: run it on tt-sim (run_artifact.py).
``tilelang-tt model ARTIFACT [--protocol-run] [--json] [--trace OUT.json] [--svg OUT.svg]``: the performance model
of an artifact (perf_model.py); its per-core schedule as a Chrome/Perfetto trace and as a picture (trace.py).
``tilelang-tt inspect ARTIFACT [--svg OUT.svg]``: a package's header and plan summary; the core map and the
CB/L1 layout drawn as SVG (inspect_view.py).
``tilelang-tt --version``: the version of tilelang-tt.

FUNC is a ``@T.prim_func`` in FILE, a ``@tilelang.jit`` function, or a function returning a ``T.prim_func``; the
parameters of the last two (for a jit function: the ones that are not tensors, and its ``T.const`` names) come
from ``--arg NAME=VALUE`` (VALUE a Python literal: 64, 0.5, (2, 4), 'float16'; anything else is a string).
TARGET is what ``tilelang.compile`` takes for tt: ``"tt -arch=blackhole -max_cores=16 -math_fidelity=HiFi4"`` or
its JSON dict form. An ARTIFACT is an artifact directory or a package file (``kernel.export(path)``, ``.ttpkg``).

Every error is one ``error: ...`` line on stderr. Exit status: 0 done; 1 the command's verdict is a failure (the
compiler refused the kernel, the sanitizer stopped the run, the SDK check failed); 2 an unusable command line,
file, input or --out; 3 an internal error (a bug; $TILELANG_TT_TRACEBACK=1 prints the traceback); 130 interrupted.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import inspect
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


def _load(spec: str, bindings: dict | None = None):
    """(the ``T.prim_func`` that ``FILE.py:FUNC`` names, its parameters bound from ``bindings`` (``--arg``); the
    target a ``@tilelang.jit(target=...)`` function names, or None)."""
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
    bindings = dict(bindings or {})
    from tilelang.jit import JITImpl
    from tvm import tirx

    target = None
    if isinstance(obj, JITImpl):
        target = obj.target
        obj = _specialise_jit(obj, name, file, bindings)
    elif not isinstance(obj, tirx.PrimFunc) and callable(obj):
        _check_bindings(name, _signature(obj), bindings)
        try:
            obj = obj(**bindings)
        except (Exception, SystemExit) as err:
            raise InputError(f"calling {name}({_call_text(bindings)}) in {file} raised {_raised(file, err)}") from None
    elif bindings:
        raise InputError(f"{name} is a T.prim_func: it has no parameters for --arg ({', '.join(bindings)})")
    if not isinstance(obj, tirx.PrimFunc):
        raise InputError(f"{name} is not a T.prim_func (nor returns one)")
    return obj, target


def parse_bindings(items: list[str]) -> dict:
    """``--arg NAME=VALUE`` items -> {NAME: value}: VALUE as a Python literal (ints, floats, strings, tuples,
    lists, None, booleans), or the text itself when it is not one (``dtype=float16``)."""
    out: dict = {}
    for item in items:
        name, sep, text = item.partition("=")
        name = name.strip()
        if not sep or not name.isidentifier():
            raise InputError(f"--arg {item!r} is not NAME=VALUE")
        if name in out:
            raise InputError(f"--arg {name} is given twice")
        try:
            out[name] = ast.literal_eval(text.strip())
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            out[name] = text
    return out


def _call_text(bindings: dict) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in bindings.items())


def _signature(func) -> inspect.Signature | None:
    try:
        return inspect.signature(func)
    except (TypeError, ValueError):           # a builtin or a callable without one: no checks, call it as it is
        return None


def _accepted(params: list[inspect.Parameter], extra: list[str]) -> str:
    names = [p.name if p.default is p.empty else f"{p.name}={p.default!r}" for p in params] + extra
    return ", ".join(names) if names else "no parameters"


def _check_bindings(what: str, signature: inspect.Signature | None, bindings: dict, tensors=(),
                    consts: list[str] | None = None) -> None:
    """A one-line InputError naming the parameter when ``bindings`` leave one of ``what``'s parameters unbound
    or name one it does not have (``tensors``: parameters the kernel's caller passes, never bound here;
    ``consts``: extra names it accepts, a jit function's ``T.const`` dimensions)."""
    if signature is None:
        return
    kinds = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    params = [p for p in signature.parameters.values() if p.name not in tensors and p.kind not in kinds]
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values())
    accepted = f"{what} accepts {_accepted(params, consts or [])}"
    for name in bindings:
        if name in tensors:
            raise InputError(f"--arg {name}: {name} is a tensor parameter of {what}, given when the kernel is called, "
                             f"not compiled; {accepted}")
        if name not in {p.name for p in params} and name not in (consts or []) and not takes_any:
            raise InputError(f"--arg {name}: {what} has no parameter {name!r}; {accepted}")
    for p in params:
        if p.default is p.empty and p.name not in bindings:
            raise InputError(f"{what} needs --arg {p.name}=VALUE; {accepted}")


def _specialise_jit(jit, name: str, file: Path, bindings: dict):
    """The T.prim_func of a ``@tilelang.jit`` function for ``bindings``: its non-tensor parameters and, for an
    eager-style one (tensor annotations, ``T.const`` dimensions), the ``T.const`` names."""
    from tvm import tirx

    func = jit.func
    if isinstance(func, tirx.PrimFunc):
        _check_bindings(name, inspect.Signature([]), bindings)
        return func
    tensors = set(getattr(func, "tensor_args", None) or {})
    plain = [n for n in jit.signature.parameters if n not in tensors]
    given = {k: v for k, v in bindings.items() if k in plain}
    _check_bindings(name, jit.signature, given, tensors)     # first: TileLang's mode inference calls the function
    consts = _jit_consts(jit, given) if tensors else []
    _check_bindings(name, jit.signature, bindings, tensors, consts)
    if consts:
        missing = [c for c in consts if c not in bindings]
        if missing:
            raise InputError(f"{name} needs --arg {missing[0]}=VALUE (a T.const dimension); {name} accepts "
                             f"{_accepted([jit.signature.parameters[n] for n in plain], consts)}")
    try:
        return jit.get_tir(**bindings)
    except (Exception, SystemExit) as err:
        raise InputError(f"specialising {name}({_call_text(bindings)}) in {file} raised {_raised(file, err)}") from None


def _jit_consts(jit, plain: dict) -> list[str]:
    """The ``T.const`` names of an eager-style jit function (TileLang builds its template from the non-tensor
    parameters first); [] for a lazy-style one or when TileLang cannot say."""
    try:
        if jit.initialize_jit_mode(**plain) != "eager":
            return []
        template = jit.func._build_tir_template(**plain)
        return [entry[3] for entry in (template.matcher or {}).values()]
    except Exception:     # noqa: BLE001 - TileLang's own message comes when the kernel is specialised
        return []


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
    artifact_help = "artifact directory (with tt.plan.json) or package file (kernel.export, .ttpkg)"
    comp = sub.add_parser("compile", help="compile a TileLang kernel for TT and write its artifact directory")
    comp.add_argument("kernel", help="FILE.py:FUNC (a T.prim_func, a @tilelang.jit function, or a function "
                                     "returning a T.prim_func)")
    comp.add_argument("--out", required=True, type=Path,
                      help="artifact directory to write: new, empty, or one tilelang-tt wrote (never user files)")
    comp.add_argument("--arg", action="append", default=[], metavar="NAME=VALUE",
                      help="a parameter of a jit function or factory (VALUE a Python literal; repeatable)")
    comp.add_argument("--target", default=None, metavar="TARGET",
                      help='what tilelang.compile takes for tt: "tt -arch=blackhole -max_cores=16 '
                           '-math_fidelity=HiFi4" (or the JSON dict form); default: the jit function\'s own tt '
                           'target, else "tt"')
    comp.add_argument("--arch", default=None, choices=["wormhole_b0", "blackhole"],
                      help="the target's arch (default wormhole_b0)")
    comp.add_argument("--max-cores", type=_integer_at_least(1, "is not a positive integer"), default=None,
                      help="the target's max_cores")
    chk = sub.add_parser("check", help="check artifacts against the real TT-Metalium 0.81 headers and library")
    chk.add_argument("artifacts", type=Path, nargs="+", metavar="artifact", help=artifact_help)
    run = sub.add_parser("run", help="run an artifact on tt-sim (the CPU emulator) with inputs from .npy files")
    run.add_argument("artifact", type=Path, help=artifact_help)
    run.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy", help="an input tensor")
    run.add_argument("--seed", type=_integer_at_least(0, "is negative (seeds are integers >= 0)"), default=None,
                     help="seeded random values for inputs not given (normal; integer tensors: uniform)")
    run.add_argument("--dim", action="append", default=[], metavar="NAME=VALUE", help="a symbolic dimension")
    run.add_argument("--scalar", action="append", default=[], metavar="NAME=VALUE", help="a scalar kernel parameter")
    run.add_argument("--out", required=True, type=Path, help="directory for NAME.npy outputs and report.json")
    run.add_argument("--no-strict", dest="strict", action="store_false",
                     help="ask the emulator for its lenient mode (strict is the default)")
    mdl = sub.add_parser("model", help="print the performance model of an artifact (modeled, not measured)")
    mdl.add_argument("artifact", type=Path, help=artifact_help)
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


def compile_options(target=None, arch: str | None = None, max_cores: int | None = None, jit_target=None):
    """The TTOptions of ``compile``: ``--target`` (else a jit function's own tt target, else "tt") with ``--arch``
    and ``--max-cores`` on top; a flag that contradicts what ``--target`` states is an InputError."""
    from tilelang_tt.errors import TTTargetError
    from tilelang_tt.target import make_options, normalize_tt_target, stated_options

    try:
        if target is not None:
            if target.lstrip().startswith("{"):
                import json

                try:
                    target = json.loads(target)
                except ValueError as err:
                    raise InputError(f"--target {target!r} is not JSON ({err})") from None
            stated = stated_options(target)
        elif jit_target is not None and _is_tt(jit_target, normalize_tt_target):
            stated = stated_options(jit_target)
        else:
            stated = {}
        for flag, name, value in (("--arch", "arch", arch), ("--max-cores", "max_cores", max_cores)):
            if value is not None:
                if target is not None and name in stated and stated[name] != value:
                    raise InputError(f"{flag} {value} contradicts --target's {name}={stated[name]}: give one of them")
                stated[name] = value
        stated["compile_only"] = True
        return make_options(**stated)
    except TTTargetError as err:
        raise InputError(f"--target: {one_line(err)}") from None


def _is_tt(target, normalize) -> bool:
    try:
        return normalize(target) is not None
    except Exception:     # noqa: BLE001 - a jit function's target that is not a valid tt target is not ours to use
        return False


def _compile(args) -> int:
    import tilelang_tt  # noqa: F401
    from tilelang_tt.artifact import check_output_dir, write_artifact
    from tilelang_tt.codegen import module_artifact
    from tilelang_tt.errors import TTError
    from tilelang_tt.pipeline import lower_module
    from tilelang_tt.summary import plan_summary
    from tvm import IRModule

    check_output_dir(args.out)             # before compiling: --out must not hold files that are not ours
    bindings = parse_bindings(args.arg)
    if args.target is not None:            # a bad --target is refused before the kernel module runs
        compile_options(args.target, args.arch, args.max_cores)
    func, jit_target = _load(args.kernel, bindings)
    options = compile_options(args.target, args.arch, args.max_cores, jit_target)
    try:
        artifact = module_artifact(lower_module(IRModule({"main": func}), options), options)
    except TTError as err:
        return _fail(err, EXIT_FAILED)
    out = write_artifact(artifact.files, artifact.name, exact_dir=args.out)
    from tilelang_tt.perf_model import model_for_artifact, summary

    # several T.Kernel launches: each launch's program, in its own directory, in launch order
    launches = getattr(artifact, "stage_plans", None)
    dirs = [Path(out) / s["dir"] for s in artifact.description["stages"]] if launches else [Path(out)]
    for directory, plan in zip(dirs, launches or [artifact.plan]):
        print(plan_summary(plan))
        print(f"  {summary(model_for_artifact(directory, plan))}")
    print(f"wrote {out}")
    return EXIT_OK


def artifact_dir(path: Path) -> Path:
    """The artifact directory ``path`` names: itself, or the package file's artifact written (content-addressed, as
    ``tilelang_tt.load`` does) under the artifact root; an InputError for anything else."""
    path = Path(path)
    if path.is_dir():
        return path
    if not path.exists():
        raise InputError(f"{path} does not exist")
    from tilelang_tt.artifact import write_artifact
    from tilelang_tt.errors import TTPackageError
    from tilelang_tt.package import read_kernel

    try:
        _, files, plan = read_kernel(path)
    except TTPackageError as err:
        raise InputError(one_line(err)) from None
    return write_artifact(files, plan["kernel"])


def _model(args) -> int:
    import json

    from tilelang_tt.errors import TTError
    from tilelang_tt.perf_model import StaticCountError, model_of, protocol_report, summary

    args.artifact = artifact_dir(args.artifact)
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
    from tilelang_tt.progress import bar
    from tilelang_tt.realcheck import TTCheckError, check_artifact

    dirs = [artifact_dir(path) for path in args.artifacts]      # every one usable before the first check runs
    failed = []
    for path, directory in bar(list(zip(args.artifacts, dirs)), desc="real-header check", unit="artifact"):
        try:
            result = check_artifact(directory)
        except TTCheckError as err:
            return _fail(err, EXIT_INPUT)
        if len(dirs) > 1:
            print(f"== {path}")
        print(result.summary())
        if not result.ok:
            failed.append(f"{path}: {one_line(result.first_error())}" if len(dirs) > 1 else result.first_error())
        else:
            print(f"all checks passed in {result.seconds:.2f} s")
    if failed:
        return _fail(failed[0] + (f" (and {len(failed) - 1} more artifacts failed)" if len(failed) > 1 else ""),
                     EXIT_FAILED)
    return 0


def _run(args) -> int:
    from tilelang_tt.errors import TTError
    from tilelang_tt.run_artifact import _pairs, run_artifact

    directory = artifact_dir(args.artifact)
    try:
        outcome = run_artifact(directory, args.out, _pairs(args.input, "--input"), seed=args.seed,
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
