"""``tilelang-tt compile FILE.py:FUNC --out DIR [--arch ARCH] [--max-cores N]``: emit without executing.
``tilelang-tt check DIR``: check an artifact against the real TT-Metalium 0.81 SDK.
``tilelang-tt run DIR --out OUT [--input NAME=FILE.npy ...] [--seed N]``: run it on tt-sim (run_artifact.py).
``tilelang-tt model DIR [--protocol-run] [--json]``: the performance model of an artifact (perf_model.py).
``tilelang-tt inspect FILE_OR_DIR [--svg OUT.svg]``: a package's header and plan summary; the core map and the
CB/L1 layout drawn as SVG (inspect_view.py).

FUNC is a ``@T.prim_func`` in FILE, or a zero-argument callable returning one.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path


def _load(spec: str):
    path, sep, name = spec.rpartition(":")
    if not sep or not path or not name:
        raise SystemExit(f"error: expected FILE.py:FUNC, got {spec!r}")
    file = Path(path)
    if not file.is_file():
        raise SystemExit(f"error: {file} does not exist")
    sys.path.insert(0, str(file.resolve().parent))
    mod_spec = importlib.util.spec_from_file_location(file.stem, file)
    module = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(module)
    if not hasattr(module, name):
        raise SystemExit(f"error: {file} has no {name!r}")
    obj = getattr(module, name)
    from tvm import tirx

    if not isinstance(obj, tirx.PrimFunc) and callable(obj):
        obj = obj()
    if not isinstance(obj, tirx.PrimFunc):
        raise SystemExit(f"error: {name} is not a T.prim_func (nor returns one)")
    return obj


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="tilelang-tt", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    comp = sub.add_parser("compile", help="compile a TileLang kernel for TT and write its artifact directory")
    comp.add_argument("kernel", help="FILE.py:FUNC")
    comp.add_argument("--out", required=True, type=Path, help="artifact directory to write")
    comp.add_argument("--arch", default="wormhole_b0", choices=["wormhole_b0", "blackhole"])
    comp.add_argument("--max-cores", type=int, default=None)
    chk = sub.add_parser("check", help="check an artifact against the real TT-Metalium 0.81 headers and library")
    chk.add_argument("artifact", type=Path, help="artifact directory (with tt.plan.json)")
    run = sub.add_parser("run", help="run an artifact on tt-sim (the CPU emulator) with inputs from .npy files")
    run.add_argument("artifact", type=Path, help="artifact directory (with tt.plan.json)")
    run.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy", help="an input tensor")
    run.add_argument("--seed", type=int, default=None,
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
    ins = sub.add_parser("inspect", help="summarise a package or artifact; draw its core map and L1 layout (SVG)")
    ins.add_argument("artifact", type=Path, help="package file (kernel.export) or artifact directory")
    ins.add_argument("--svg", type=Path, default=None, help="SVG to write (default: ./<kernel>.tt.svg)")
    args = parser.parse_args(argv)
    if args.command == "inspect":
        return _inspect(args)
    if args.command == "model":
        return _model(args)
    if args.command == "check":
        return _check(args.artifact)
    if args.command == "run":
        return _run(args)

    import tilelang_tt  # noqa: F401
    from tilelang_tt.artifact import write_artifact
    from tilelang_tt.codegen import generate
    from tilelang_tt.errors import TTError
    from tilelang_tt.pipeline import lower_module
    from tilelang_tt.summary import plan_summary
    from tilelang_tt.target import make_options
    from tvm import IRModule

    func = _load(args.kernel)
    try:
        options = make_options(arch=args.arch, max_cores=args.max_cores, compile_only=True)
        mod = lower_module(IRModule({"main": func}), options)
        artifact = generate(mod["main"], options)
    except TTError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    out = write_artifact(artifact.files, artifact.name, exact_dir=args.out)
    print(plan_summary(artifact.plan))
    from tilelang_tt.perf_model import model_for_artifact, summary

    print(f"  {summary(model_for_artifact(out, artifact.plan))}")
    print(f"wrote {out}")
    return 0


def _model(args) -> int:
    import json

    from tilelang_tt.errors import TTError
    from tilelang_tt.perf_model import StaticCountError, model_for_artifact, protocol_run, summary

    if not (args.artifact / "tt.plan.json").is_file():
        print(f"error: {args.artifact} has no tt.plan.json", file=sys.stderr)
        return 2
    try:
        model = protocol_run(args.artifact) if args.protocol_run else model_for_artifact(args.artifact)
    except (TTError, StaticCountError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(json.dumps(model, indent=2) if args.json else summary(model))
    return 1 if "error" in model else 0


def _inspect(args) -> int:
    from tilelang_tt.errors import TTError
    from tilelang_tt.inspect_view import inspect

    try:
        text, _ = inspect(args.artifact, args.svg)
    except TTError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(text)
    return 0


def _check(artifact: Path) -> int:
    from tilelang_tt.realcheck import TTCheckError, check_artifact

    try:
        result = check_artifact(artifact)
    except TTCheckError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(result.summary())
    if not result.ok:
        print(f"error: {result.first_error()}", file=sys.stderr)
        return 1
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
        print(f"error: {err}", file=sys.stderr)
        return 2
    if outcome.status != 0:
        print(f"error: {outcome.report['error']}", file=sys.stderr)
        return outcome.status
    total = outcome.report["report"].get("total", {})
    print(f"ran {outcome.report['kernel']} on tt-sim ({outcome.report['arch']}) in "
          f"{outcome.report['report'].get('wall_seconds', 0.0):.2f} s; {len(total)} counters in report.json")
    for name, path in outcome.report["outputs"].items():
        print(f"wrote {name}: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
