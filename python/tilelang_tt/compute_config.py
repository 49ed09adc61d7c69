"""The compute kernel's math fidelity, fp32 DST accumulation and packer L1 accumulation: the user's choice, or
ttnn's default.

Precedence: ``T.annotate_tt_compute(...)`` in the kernel > target options (``"tt -math_fidelity=LoFi
-fp32_dest_acc=true"``) > defaults. A kernel without ``T.gemm`` (softmax, normalization, elementwise) defaults to
HiFi4, as ttnn's softmax / layernorm / eltwise ops do (their reduce and ELWMUL products stay exact). Kernels with a
GEMM follow ttnn's matmul (tt-metal
``ttnn/cpp/ttnn/operations/matmul/device/matmul_device_operation.cpp``, ``create_matmul_attributes``):
HiFi2 for bf16 inputs, LoFi when every input is block-float (bfp8_b/bfp4_b), HiFi4 when every input is
float32 — and HiFi4 when an input is float16 (ttnn has no fp16 matmul default; fp16's 10 mantissa bits need every
fidelity phase: at HiFi2 SrcB, which holds in0, keeps 1 + 6 bits, so each product loses up to 2^-6 relative,
TT_KERNEL_PATTERNS.md 5.2); fp32 accumulation (``default_fp32_acc``) when the output is float32 — here, as before this module
existed, whenever the compute kernel touches a float32 CB (``TensorizeTT``), which includes a float32 output.
Packer L1 accumulation (ttnn's ``packer_l1_acc``) is on unless the annotation or the target option turns it off;
TensorizeTT applies it where it can (``accumulate`` of each CB-resident matmul accumulator).
The resolved values are written to the function's ``tt.compute`` (``records.Compute``) and from there reach the plan
(``math_fidelity``, ``kernels.compute.fp32_dest_acc_en``) and the host program's ``ComputeConfig``.
"""

from __future__ import annotations

import tvm
from tvm import tirx

from . import attrs
from .device import CB_INT_FORMATS
from .errors import TTAnnotationError
from .target import MATH_FIDELITIES

_BLOCK_FLOAT = ("bfp8", "bfp4", "bfloat8_b", "bfloat4_b")


def _float32_math(body) -> bool:
    """True when a value stored in the body is computed with float32 arithmetic (a float32 operation anywhere in a
    stored expression; loads of 16-bit buffers and 16-bit constants alone are not)."""
    found = []

    def visit(n):
        if isinstance(n, tirx.BufferStore) and not found:
            def inner(e):
                if isinstance(e, tirx.PrimExpr) and not isinstance(e, (tirx.BufferLoad, tirx.FloatImm, tirx.IntImm,
                                                                       tirx.Var)) and str(e.dtype) == "float32":
                    found.append(e)
            tirx.stmt_functor.post_order_visit(tirx.Evaluate(n.value), inner)

    tirx.stmt_functor.post_order_visit(body, visit)
    return bool(found)


def dst_holds_fp32(cbs, body, config) -> bool:
    """fp32_dest_acc_en of a kernel whose CB table is ``cbs`` (records.CircularBuffer values) and body ``body``: the
    choice of ``config`` (records.Compute: annotation or target option) when made; else on whenever compute touches
    a float32 CB, a stored value is computed in float32 on 16-bit data (``T.Cast("float32", x_bf16[i, j])``, a
    float32 scalar parameter: a 16-bit DST would round every intermediate to the CBs' format), or an integer tile
    passes DST (the LLK asserts fp32_dest_acc_en for Int8/UInt8/Int32: llk_unpack_common.h, llk_math_common.h)."""
    chosen = config.fp32_dest_acc if config is not None else None
    if chosen is not None:
        return bool(chosen)
    in_compute = [cb for cb in cbs if "compute" in list(cb.producer) + list(cb.consumer)]
    return (any(str(cb.dtype) == "float32" or cb.format in CB_INT_FORMATS for cb in in_compute)
            or _float32_math(body))


def check_choice(math_fidelity, fp32_dest_acc, construct: str, packer_l1_acc=None, allow_tf32=None,
                 allow_fp16_reduced=None) -> None:
    if math_fidelity is not None and math_fidelity not in MATH_FIDELITIES:
        raise TTAnnotationError(f"math_fidelity={math_fidelity!r} is not one of {list(MATH_FIDELITIES)}",
                                construct=f"{construct}(math_fidelity=...)")
    if fp32_dest_acc is not None and not isinstance(fp32_dest_acc, bool):
        raise TTAnnotationError(f"fp32_dest_acc={fp32_dest_acc!r} must be True, False or None",
                                construct=f"{construct}(fp32_dest_acc=...)")
    if packer_l1_acc is not None and not isinstance(packer_l1_acc, bool):
        raise TTAnnotationError(f"packer_l1_acc={packer_l1_acc!r} must be True, False or None",
                                construct=f"{construct}(packer_l1_acc=...)")
    for name, value in (("allow_tf32", allow_tf32), ("allow_fp16_reduced", allow_fp16_reduced)):
        if value is not None and not isinstance(value, bool):
            raise TTAnnotationError(f"{name}={value!r} must be True, False or None", construct=f"{construct}({name}=...)")


def ttnn_default_fidelity(input_dtypes: list[str]) -> str:
    """The default math fidelity for these input dtypes: ttnn matmul's, except HiFi4 for float16 inputs."""
    if input_dtypes and all(d == "float32" for d in input_dtypes):
        return "HiFi4"
    if "float16" in input_dtypes:
        return "HiFi4"
    if input_dtypes and all(any(b in d for b in _BLOCK_FLOAT) for d in input_dtypes):
        return "LoFi"
    return "HiFi2"


def annotation(func: tirx.PrimFunc) -> dict:
    found: list[dict] = []

    def visit(node):
        if isinstance(node, tirx.SBlock) and attrs.COMPUTE_ANNOTATION in node.annotations:
            found.append({str(k): v for k, v in node.annotations[attrs.COMPUTE_ANNOTATION].items()})

    tirx.stmt_functor.post_order_visit(func.body, visit)
    if len(found) > 1:
        raise TTAnnotationError("T.annotate_tt_compute appears more than once", construct="T.annotate_tt_compute")
    spec = found[0] if found else {}
    out = {}
    if "math_fidelity" in spec:
        out["math_fidelity"] = str(spec["math_fidelity"])
    for key in ("fp32_dest_acc", "packer_l1_acc", "allow_tf32", "allow_fp16_reduced"):
        if key in spec:
            out[key] = bool(spec[key])
    return out


def _storage(func: tirx.PrimFunc, buf) -> str:
    """A tensor's storage for the default fidelity: its T.TTShard(format=...) ("bfp8_b"), int8 weights' Bfp8_b
    (device.READ_ONLY_FORMATS), else its dtype."""
    from .device import READ_ONLY_FORMATS

    found = []

    def visit(node):
        if isinstance(node, tirx.SBlock) and attrs.SHARDING_ANNOTATION in node.annotations:
            for var, shard in node.annotations[attrs.SHARDING_ANNOTATION].items():
                if var.same_as(buf.data) and "format" in shard:
                    found.append(str(shard["format"]))

    tirx.stmt_functor.post_order_visit(func.body, visit)
    return (found[0] if found else READ_ONLY_FORMATS.get(str(buf.dtype), str(buf.dtype))).lower()


def _has_gemm(func: tirx.PrimFunc) -> bool:
    found = []

    def visit(node):
        if isinstance(node, tirx.Call) and isinstance(node.op, tvm.ir.Op) and node.op.name == "tl.tileop.gemm":
            found.append(node)

    tirx.stmt_functor.post_order_visit(func.body, visit)
    return bool(found)


def resolve(func: tirx.PrimFunc, options) -> dict:
    """{"math_fidelity": str, "fp32_dest_acc": bool | None (None: TensorizeTT decides), "packer_l1_acc": bool
    (whether CB-resident accumulators may accumulate in the packer, TensorizeTT), "source": ...}."""
    ann = annotation(func)
    inputs = [_storage(func, func.buffer_map[p]) for p in func.params if p in func.buffer_map]
    if _has_gemm(func):
        fidelity, source = ttnn_default_fidelity(inputs), "ttnn matmul default for the input formats"
    else:   # ttnn's softmax / normalization / eltwise ops default to HiFi4: reduce and ELWMUL products stay exact
        fidelity, source = "HiFi4", "ttnn default for kernels without a matmul"
    if options.math_fidelity is not None:
        fidelity, source = options.math_fidelity, "target option"
    if "math_fidelity" in ann:
        fidelity, source = ann["math_fidelity"], "T.annotate_tt_compute"
    fp32 = ann.get("fp32_dest_acc", options.fp32_dest_acc)
    l1_acc = ann.get("packer_l1_acc", options.packer_l1_acc)
    tf32, tf32_source = False, "default (exact float32)"
    if options.allow_tf32 is not None:
        tf32, tf32_source = bool(options.allow_tf32), "target option"
    if "allow_tf32" in ann:
        tf32, tf32_source = bool(ann["allow_tf32"]), "T.annotate_tt_compute"
    fp16_reduced = ann.get("allow_fp16_reduced", options.allow_fp16_reduced)
    return {"math_fidelity": fidelity, "fp32_dest_acc": fp32, "math_fidelity_source": source,
            "packer_l1_acc": l1_acc is not False, "allow_tf32": tf32, "allow_tf32_source": tf32_source,
            "allow_fp16_reduced": bool(fp16_reduced)}


# Ops that copy a CB's tile into DST (A2D). For a Float32 CB with UnpackToDestMode::UnpackToDestFp32 the unpacker
# writes its fp32 data straight to DST (exact); otherwise the data goes through SrcA/SrcB as TF32 (fp32 DST
# accumulation) or BF16 (TT_KERNEL_PATTERNS.md 5.1).
A2D_OPS = frozenset(["copy_tile", "transpose_tile", "unary_bcast_rows", "unary_bcast_cols", "unary_bcast_scalar"])


def unpack_to_dest_cbs(program, fp32_acc: bool) -> list[int]:
    """The CB indices whose ``unpack_to_dest_mode`` is ``UnpackToDestFp32``: every Float32 CB the compute kernel
    only copies into DST (A2D ops) when DST accumulates in fp32, so that copy_tile + SFPU math on it is exact
    fp32. A CB an FPU op reads (add_tiles, matmul_tiles, reduce_tile, broadcasts) keeps ``Default``: the hardware
    cannot feed SrcA/SrcB from a CB configured to unpack to DST, so its data reaches the FPU as TF32."""
    if not fp32_acc:
        return []
    from .intrinsics import CALLS
    from .ttir import CB, calls

    a2d, fpu = set(), set()
    for c in calls(program.kernels["compute"].body):
        spec = CALLS.get(c.op)
        if spec is None or spec.kind != "op":
            continue
        for a in c.args:
            if isinstance(a, CB):
                (a2d if c.op in A2D_OPS else fpu).add(a.name)
    return sorted(program.cbs[n].index for n in a2d - fpu if program.cbs[n].fmt == "Float32")


def exact_reduce(src_format: str, fp32_acc: bool, allow_tf32: bool) -> bool:
    """Whether a reduction takes the exact fp32 path: its data is a Float32 CB, DST accumulates in fp32 and TF32 is not
    allowed. The path copies the tiles into DST (copy_tile: UnpackToDestFp32, exact), folds them with SFPU fp32 ops
    (add_binary_tile / binary_max_tile / binary_min_tile) and reduces the folded tile with ``sfpu_reduce`` (the
    0.81 API ttnn's ``ReduceFp32Mode::Accurate`` uses). The FPU reduce would read the data through SrcA/SrcB as TF32
    (TT_KERNEL_PATTERNS.md 1.2, 5.1)."""
    return src_format == "Float32" and fp32_acc and not allow_tf32


# How a Float32 CB's data reaches the FPU (SrcA/SrcB, 19 bits wide; TT_KERNEL_PATTERNS.md 5.1, 5b): TF32 with fp32 DST
# accumulation, BF16 without, FP16 when the program has a Float16 CB (the 0.81 library's unpack format selection).
# "fp32": SFPU arithmetic on values unpacked to DST (exact fp32). Ordered from the most to the least exact.
PRECISION_PATHS = ("fp32", "tf32", "fp16", "bf16")


def _src_path(program, fp32_acc: bool) -> str:
    if any(cb.fmt == "Float16" for cb in program.cbs.values()):
        return "fp16"
    return "tf32" if fp32_acc else "bf16"


def _kinds(body: list) -> list[str]:
    """The kind of operation each compute call belongs to for the precision report ("reduce", "matmul",
    "eltwise"): its ``origin``; a transpose (calls in a row with origin "transpose", their pack naming the block
    they fill) counts as the operation that reads the transposed block."""
    from .ttir import CB

    readers: dict[str, str] = {}
    for c in body:
        if c.origin and c.origin != "transpose":
            for a in c.args:
                if isinstance(a, CB):
                    readers.setdefault(a.name, c.origin)
    kinds = [c.origin for c in body]
    i = 0
    while i < len(body):
        if body[i].origin != "transpose":
            i += 1
            continue
        j = i
        while j < len(body) and body[j].origin == "transpose":
            j += 1
        dest = next((a.name for c in body[i:j] if c.op == "pack_tile" for a in c.args if isinstance(a, CB)), None)
        kinds[i:j] = [readers.get(dest, "eltwise")] * (j - i)
        i = j
    return [k if k in ("reduce", "matmul") else "eltwise" for k in kinds]


# Significant bits (the implicit one included) of a value of each CB format, and of a Float32 CB's value as it reaches
# SrcA/SrcB on each path (``float32_operands``).
_FORMAT_BITS = {"Float16": 11, "Float16_b": 8, "Float32": 24}
_FLOAT32_SRC_BITS = {"tf32": 11, "fp16": 11, "bf16": 8}
_PHASES = {"LoFi": 1, "HiFi2": 2, "HiFi3": 3, "HiFi4": 4}


def _multiplied_bits(srca: bool, fidelity: str) -> int:
    """How many significant bits of an operand the FPU's multipliers use at ``fidelity`` (tt-sim's fidelity.cpp,
    TT_KERNEL_PATTERNS.md 5b): SrcA (matmul in1) 1 + 4 at LoFi, 1 + 9 from HiFi2 on (its last TF32 bit is in no
    phase); SrcB (matmul in0) 1 + 6 up to HiFi3 (HiFi3 multiplies its next 4 bits by SrcA's first 5 only), all 11
    at HiFi4."""
    phases = _PHASES[fidelity]
    if srca:
        return 5 if phases == 1 else 10
    return 11 if phases == 4 else 7


def _matmul_operands(body, program, src: str, fidelity: str) -> dict:
    """``{"in0": {...}, "in1": {...}}`` for the kernel's T.gemm calls: per operand the CB format and the fewest of
    its significant bits any matmul multiplies (``bits`` of ``of``)."""
    from .ttir import CB

    out: dict[str, dict] = {}
    carried: dict[str, str] = {}    # a scratch CB an on-chip transpose fills: the format of the data it holds
    source = None
    for c in body:
        if c.op == "transpose_tile":
            source = program.cbs[c.args[0].name].fmt
        elif c.op == "pack_tile" and c.origin == "transpose" and source is not None:
            carried[next(a.name for a in c.args if isinstance(a, CB))] = source
        if c.op not in ("matmul_tiles", "matmul_block"):
            continue
        for operand, arg in (("in0", c.args[0]), ("in1", c.args[1])):
            fmt = carried.get(arg.name, program.cbs[arg.name].fmt)
            held = fmt == "Float32" and program.cbs[arg.name].dtype == "float16"
            if held:
                fmt = "Float16"      # a float16 fragment held as Float32 (MemorySpaceLowerTT): FP16 in SrcA/SrcB
            if fmt not in _FORMAT_BITS:    # block-float weights: the user chose their precision
                continue
            reach = _FLOAT32_SRC_BITS[src] if fmt == "Float32" else _FORMAT_BITS[fmt]
            bits = min(reach, _multiplied_bits(operand == "in1", fidelity))
            if operand not in out or bits < out[operand]["bits"]:
                out[operand] = {**out.get(operand, {}), "format": fmt, "bits": bits, "of": _FORMAT_BITS[fmt]}
            if held:    # its fp32 value reaches SrcA/SrcB truncated to FP16, where a GPU store rounds to nearest
                out[operand]["truncated"] = arg.name
    return out


def _float16_held(body: list, program) -> list[str]:
    """The float16 tile buffers compute writes and reads back into a value it packs elsewhere than where float16
    rounding happens (a Float16 CB, or float16 results the host rounds from Float32 pages) or a matmul operand (whose
    SrcA/SrcB take them as FP16: ``matmul_operands`` ``truncated``): held as Float32, their values are the unrounded
    float32 ones (0.81 has no float16 rounding in an fp32 DST). A DST slot carries the buffer it was computed from."""
    from .intrinsics import CALLS
    from .ttir import CB, Dst

    def held(name: str) -> bool:
        cb = program.cbs.get(name)
        return cb is not None and cb.dtype == "float16" and cb.fmt == "Float32" and "compute" in cb.producer

    matmul_operands = {a.name for c in body if c.op in ("matmul_tiles", "matmul_block") for a in c.args
                       if isinstance(a, CB)}
    out, origin = set(), {}     # origin: DST slot -> the held CB its value comes from
    for c in body:
        if c.op not in CALLS or c.op in ("matmul_tiles", "matmul_block"):
            continue
        cbs = [a.name for a in c.args if isinstance(a, CB)]
        slots = [str(a.slot) for a in c.args if isinstance(a, Dst)]
        if c.op == "pack_tile":
            name = origin.get(slots[0]) if slots else None
            dest = program.cbs[cbs[0]]
            rounds = dest.fmt == "Float16" or dest.dtype == "float16" and "writer" in dest.consumer
            if name is not None and not rounds and cbs[0] not in matmul_operands:
                out.add(name)
            continue
        source = next((n for n in cbs if held(n)), None) or next((origin[s] for s in slots if s in origin), None)
        if source is not None and slots:
            origin[slots[-1] if c.op == "copy_tile" else slots[0]] = source
    return sorted(out)


def _fp16_split_fix(precision: dict, fidelity: str) -> str:
    """How to get every bit of a float16 in1 that Float16OperandsTT did not split."""
    if precision.get("float16_in1") == "unsplit":
        return (f"splitting in1 into two matmuls does not fit ({precision['float16_in1_reason']}): use smaller "
                "blocks for every bit, or ")
    if fidelity != "HiFi4":
        return "at math_fidelity=\"HiFi4\" Float16OperandsTT splits in1 into two matmuls (every bit), or "
    return "accumulate in a float32 fragment and Float16OperandsTT multiplies every bit (two matmuls), or "


def precision_warnings(precision: dict, fidelity: str) -> list[str]:
    """What a kernel computes less exactly than its dtypes, unless the user chose it (math fidelity, allow_tf32):
    the lines of a ``TTPrecisionWarning``, each with the bound and how to change it."""
    out = []
    chosen = precision.get("math_fidelity_source") in ("T.annotate_tt_compute", "target option")
    for operand, o in sorted(precision.get("matmul_operands", {}).items()):
        if o["bits"] >= o["of"]:
            continue
        if o["format"] == "Float32" and precision.get("float32_operands") == "fp16":
            if not precision.get("allow_fp16_reduced"):
                out.append(f"T.gemm reads its float32 {operand} as FP16 (this kernel also has float16 data and "
                           f"SrcA/SrcB take one format): {o['bits']} of its 24 significant bits and FP16's range, "
                           "magnitudes below 2^-14 flushed to zero and above 65504 overflowed; convert the float16 "
                           "data to bfloat16 or float32 in another kernel, or allow_fp16_reduced=True "
                           "(T.annotate_tt_compute) accepts this")
            continue
        if o["format"] == "Float32":
            if not precision["allow_tf32"]:
                out.append(f"T.gemm multiplies {o['bits']} of the {o['of']} significant bits of its float32 {operand} "
                           f"(the FPU's SrcA/SrcB hold TF32): relative error up to 2^-{o['bits'] - 1} per product; "
                           f"allow_tf32=True (T.annotate_tt_compute) accepts it")
            continue
        exact = next((f for f in _PHASES if _multiplied_bits(operand == "in1", f) >= o["of"]), None)
        if exact is not None and chosen:
            continue     # the user chose this fidelity over one that multiplies every bit
        if exact is None and precision.get("allow_fp16_reduced"):
            continue     # the user accepted SrcA's 10 bits
        dtype = "float16" if o["format"] == "Float16" else "bfloat16"
        fix = (f"math_fidelity=\"{exact}\" (T.annotate_tt_compute) multiplies all {o['of']}; choosing "
               f"math_fidelity=\"{fidelity}\" accepts this" if exact else
               "the FPU's SrcA multiplier takes 10 bits at every fidelity (tt-sim computes the same); "
               + _fp16_split_fix(precision, fidelity) + "allow_fp16_reduced=True (T.annotate_tt_compute) accepts this")
        out.append(f"T.gemm multiplies {o['bits']} of the {o['of']} significant bits of its {dtype} {operand} at "
                   f"{fidelity}: relative error up to 2^-{o['bits'] - 1} per product; {fix}")
    for operand, o in sorted(precision.get("matmul_operands", {}).items()):
        if "truncated" in o and not precision.get("allow_fp16_reduced"):
            out.append(f"a matmul (T.gemm, or the selection matmul moving stride-2 columns) reads its {operand}, "
                       "float16 values compute wrote and holds as float32, truncated to float16 (SrcA/SrcB hold "
                       "FP16) where a GPU rounds each store to the nearest: one float16 ulp at most (relative 2^-10) "
                       "per element; allow_fp16_reduced=True (T.annotate_tt_compute) accepts this")
    if precision.get("float16_held") and not precision.get("allow_fp16_reduced"):
        names = ", ".join(precision["float16_held"])
        out.append(f"float16 tile buffers {names} hold the float32 values compute wrote, unrounded (0.81 has no "
                   "float16 rounding in an fp32 DST): where a GPU rounds each store to float16 (relative 2^-11; "
                   "beyond 65504 to inf, below 2^-24 to zero), these keep float32's precision and range; declare "
                   "them float32 to say so, or bfloat16 to round; allow_fp16_reduced=True (T.annotate_tt_compute) "
                   "accepts this")
    if precision.get("float16_pack") == "bf16":
        out.append("float16 results computed in an fp32 DST are packed through bfloat16 (8 of 11 significant bits, "
                   "relative error up to 2^-9; the 0.81 pack configuration): store bfloat16 or float32 results, or "
                   "T.annotate_tt_compute(fp32_dest_acc=False) for a 16-bit DST")
    return out


def precision(program, fp32_acc: bool, resolved) -> dict:
    """The plan's ``precision`` (``resolved``: the kernel's ``records.Compute``): ``allow_tf32`` and who chose it; per kind of operation with float32 data in the
    compute kernel ("reduce", "matmul", "eltwise") the least exact path any of its calls takes (``PRECISION_PATHS``);
    ``float32_operands``: how Float32 CBs reach SrcA/SrcB in this kernel; ``float16_pack``: "bf16" when a Float16
    CB is packed from an fp32 DST (8 significant bits: TT_KERNEL_PATTERNS.md 5b; tt-sim models it); ``float16_results``:
    the float16 tensors written as Float32 pages the host rounds (what avoids that loss for results); ``dst``: the
    width of DST's values ("fp32" with fp32_dest_acc_en, else "16-bit": every intermediate rounded to 16 bits)."""
    from .intrinsics import CALLS
    from .ttir import CB, calls

    to_dest = set(unpack_to_dest_cbs(program, fp32_acc))
    src = _src_path(program, fp32_acc)
    worst: dict[str, str] = {}

    def note(kind: str, path: str):
        if kind not in worst or PRECISION_PATHS.index(path) > PRECISION_PATHS.index(worst[kind]):
            worst[kind] = path

    body = list(calls(program.kernels["compute"].body))
    fp16_pack = False
    for c, kind in zip(body, _kinds(body)):
        spec = CALLS.get(c.op)
        cbs = [program.cbs[a.name] for a in c.args if isinstance(a, CB) and a.name in program.cbs]
        if c.op == "pack_tile" and fp32_acc and any(cb.fmt == "Float16" for cb in cbs):
            fp16_pack = True
        if spec is None or spec.kind != "op":
            continue
        f32 = [cb for cb in cbs if cb.fmt == "Float32"]
        if c.op in A2D_OPS:
            for cb in f32:
                note(kind, "fp32" if cb.index in to_dest else src)
        elif spec.unit == "fpu":      # SrcA/SrcB operands: matmul, FPU binary / broadcast, reduce_tile
            for _ in f32:
                note(kind, src)
        elif c.op.startswith("sfpu_reduce"):
            note(kind, "fp32")
    out = {"allow_tf32": bool(resolved.allow_tf32), "allow_tf32_source": resolved.allow_tf32_source,
           "float32_operands": src, "ops": dict(sorted(worst.items())),
           "dst": "fp32" if fp32_acc else "16-bit"}
    if fp16_pack:
        out["float16_pack"] = "bf16"
    held = _float16_held(body, program)
    if held:
        out["float16_held"] = held
    if resolved.float16_results:     # MemorySpaceLowerTT: Float32 pages the host rounds to float16
        out["float16_results"] = list(resolved.float16_results)
    if resolved.fp16_in1_split:      # Float16OperandsTT: every bit of a float16 in1 multiplied, in two matmuls
        out["float16_in1"] = "split"
    elif resolved.fp16_in1_unsplit:  # the split would not fit: in1 keeps 10 bits, warned with the reason
        out["float16_in1"] = "unsplit"
        out["float16_in1_reason"] = resolved.fp16_in1_unsplit
    elif resolved.allow_fp16_reduced:
        out["allow_fp16_reduced"] = True
    operands = _matmul_operands(body, program, src, resolved.math_fidelity)
    if operands:
        out["matmul_operands"] = operands
        out["math_fidelity_source"] = resolved.math_fidelity_source
    return out
