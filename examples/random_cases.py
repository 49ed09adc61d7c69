"""Seeded random kernels for the differential test (tests/tt/test_differential.py) and the soak run
(benchmarks/soak.py): each case is a kernel, its inputs and a check of its outputs against float64 math.

Two generations of cases:

* templates (``gemm``, ``eltwise``, ``epilogue``, ``chained``, ``bmm``, ``dgemm``): GEMMs (any shape, K tails),
  same-dtype elementwise kernels, GEMM + bias + ReLU, the two-layer MLP, batched GEMMs over rank-3 tensors and a 3-D
  grid, a GEMM over a symbolic M; random shape, block size, dtype, schedule policy and arch.
* kernels written the way TileLang's users write them (``rows``, ``reduce``, ``expr``, ``gemm2``): generated as
  TileLang source text and compiled from it (``source(case)`` is the kernel; ``python -m examples.random_cases
  SEED INDEX`` prints one), modelled on TileLang's own examples (norm/rms_norm.py, norm/layernorm.py,
  online_softmax/online_softmax.py, elementwise/example_elementwise_add.py, gemm/example_gemm.py) and on every
  construct docs/usage.md lists:

  - mixed dtypes: bf16 / fp16 / fp32 tensors copied straight into fp32 (or narrower) fragments and shared buffers
    (``T.copy(X[by * bm, 0], x)``, also as a slice ``X[row:row + bm, :]``), shared <-> fragment copies across
    dtypes, ``T.Cast`` loads, results stored to tensors of another dtype directly or through a buffer of a third;
  - values computed and never used (a fragment, a reduction);
  - let-bound indices (``row = by * bm`` then ``X[row, 0]``; ``t = by * bm + i`` in a T.Parallel) and let-bound
    values (``norm = ...``, ``inv_D = 1.0 / D``);
  - float32 reductions (sum, max, min, abssum, absmax; dim 0 and 1; ``clear=False``) checked at float32 bounds;
  - RMSNorm (one pass, and the split-K form that updates the reader's shared buffer in place), softmax (exp, and
    exp2 with log2(e) folded in), LayerNorm with its Mean / Rstd outputs, TileLang's online softmax
    (``T.fill(lse, -T.infinity)``, ``T.Pipelined``), 1-row and 16-row blocks;
  - random element-wise expressions: ``+ - * /``, constants, scalar kernel parameters, comparisons as values and
    in ``T.if_then_else``, ``T.max / T.min / T.clamp``, ``T.abs``, ``T.exp / exp2 / log / log2 / sqrt / rsqrt``,
    ``1 / x``, ``T.tanh / T.sigmoid / T.erf``, GELU (erf form), SiLU, constant powers, casts, row / column vector
    broadcasts, transposed indexing (``At[u, t]``), loop variables as values (a causal mask,
    ``T.Cast("float32", u)``), a uint8 tensor dequantized ``(q - 128) * s``, two stores in one T.Parallel, rank-3
    tensors with a 3-D grid, symbolic M;
  - GEMMs with ``transpose_A`` / ``transpose_B``, ``T.Pipelined(num_stages=...)``, ``T.use_swizzle``, ``T.fill``,
    random epilogues on the accumulator (bias vector, scalar parameter), outputs of another dtype through a
    shared buffer (TileLang's elementwise example), ``math_fidelity`` / ``packer_l1_acc`` / ``max_cores``.

  Not generated (each has its own tests): Bfp8_b / Bfp4_b / int8 / packed-int4 weights and per-group scales
  (test_dequant, test_blockfloat, test_int8), ``T.annotate_tt_sharding`` placements (test_annotations),
  FlashAttention (test_everyday, test_sdpa).

The reference and its tolerance (the ``rows`` / ``reduce`` / ``expr`` / ``gemm2`` kinds): the kernel's math is
evaluated in float64 on the exact input values (the reference), and again in interval arithmetic (class ``Iv``)
under this error model, which gives every output element an interval [lo, hi] it must lie in:

* storing a value in a buffer or tensor of dtype d: float32 exact; bfloat16 to nearest (the packer rounds ties away
  from zero, DST rounds to even; either way |err| <= 2^-8 |v|; denormals flush, |v| < 2^-126); float16 to nearest
  even (2^-11 |v|, subnormals 2^-25), or, when the plan says ``precision.float16_pack == "bf16"`` (an fp16 CB
  packed from an fp32 DST goes through bf16: TT_KERNEL_PATTERNS.md 5b), 2^-8 |v| with |v| < 2^-14 flushed;
* arithmetic: every TIR node rounds once in its own dtype (TileLang's semantics: ``a * 2.0`` of a bf16 ``a`` is a
  float32 multiply, ``a * b`` of two bf16 values a bf16 one): float32 nodes within u = 2^-24 relative (the
  exact fp32 path is the default; TF32's 2^-10 is an opt-in, never assumed); division and the SFPU functions as the
  emulator computes them (fp32 libm, docs/emulator.md "SFPU ops"): within FN_ULPS[f] * u, from their composition;
* a float32 sum of n terms, in any order, within n * u * sum|x| (max / min / abs-max are exact); ``clear=False``
  adds the running value as one more term;
* a GEMM (fp32 accumulation of K products): bf16 at HiFi2 drops in0's last mantissa bit (2^-7 relative per
  product), fp16 at HiFi4 the 10th bit of in1 (2^-10), HiFi4 bf16 is exact; plus (K + 1) * u of sum_k |a||b|;
* a comparison whose operands' intervals overlap may go either way (the result spans both branches);
* the float64 evaluation itself: each bound moved out by 2^-46 relative per operation.

A rounding widens the interval around the unrounded value, so a kernel that keeps more precision than TileLang's
semantics ask (a cast it skips, bf16 math done in fp32) passes; one that keeps less does not.

An element outside its interval (or NaN) is a mismatch. The template kinds keep their own documented bounds
(``inputs_and_check`` below).
"""

import linecache
import math
import random
import sys
from dataclasses import dataclass, field

import numpy as np
import tilelang.language as T
import torch

from examples import kernels as K


def _pin_source(path: str) -> None:
    """TileLang's parser reads a kernel's source back through linecache, which re-reads a file whose mtime changed:
    after an edit of examples/kernels.py during a long run (the soak), its kernels would be parsed from other lines
    than the code imported. Pin the text as imported (linecache never re-checks an entry without an mtime)."""
    lines = linecache.getlines(path)
    if lines:
        linecache.cache[path] = (sum(map(len, lines)), None, lines, path)


_pin_source(K.__file__)
_pin_source(__file__)

POLICIES = [None, dict(policy="strided"), dict(policy="rect"), dict(policy="contiguous", order="block_linear(2)")]
SIZES = [1, 7, 32, 33, 64, 75, 96, 100, 128, 160, 168, 200]
FLOATS = ["float32", "bfloat16", "float16"]
TORCH = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16, "uint8": torch.uint8}
U = 2.0 ** -24                 # float32 unit roundoff
SLOP = 2.0 ** -46              # float64's own rounding in the interval bounds, per operation
# Division and SFPU functions in units of u (relative), as tt-sim computes them (src/tt/sim/sfpu.cpp, fp32 libm):
# expf / exp2f / logf / powf within 1 ulp and tanhf / erff within 2 ulp; 1 ulp <= 2u, so 4u each; sqrtf is correctly
# rounded; rsqrt = 1 / sqrtf and a / b = a * (1 / b) round twice; sigmoid = 1 / (1 + expf(-x)) and log2 = logf *
# (1 / ln 2) add two roundings to expf / logf.
FN_ULPS = {"exp": 4, "exp2": 4, "log": 4, "log2": 6, "sqrt": 1, "rsqrt": 2, "recip": 2, "div": 2, "tanh": 4,
           "sigmoid": 6, "erf": 4, "pow": 4}


@dataclass
class Case:
    kind: str
    shape: tuple
    block: tuple
    dtype: str
    schedule: dict | None
    arch: str
    op: str = "add"
    params: dict = field(default_factory=dict)

    def __str__(self):
        extra = f" {self.params['tag']}" if "tag" in self.params else ""
        return f"{self.kind}{self.shape} block{self.block} {self.dtype} {self.schedule} {self.arch} {self.op}{extra}"

    def target(self) -> dict:
        """The target dict to compile this case for (arch and any target options the case draws)."""
        return {"kind": "tt", "arch": self.arch, **self.params.get("target", {})}


# ---------------------------------------------------------------------------------------------------------------
# Interval arithmetic: every value the kernel may compute, under the error model of the module docstring.
# ---------------------------------------------------------------------------------------------------------------
def f64(x) -> torch.Tensor:
    return x.to(torch.float64) if isinstance(x, torch.Tensor) else torch.tensor(float(x), dtype=torch.float64)


class Iv:
    """A closed interval [lo, hi] per element (float64 tensors)."""

    __slots__ = ("lo", "hi")

    def __init__(self, lo, hi=None):
        self.lo = f64(lo)
        self.hi = self.lo if hi is None else f64(hi)

    def map(self, fn) -> "Iv":
        """A structural operation (indexing, reshape, padding) applied to both bounds."""
        return Iv(fn(self.lo), fn(self.hi))


def fp16_via_bf16(plan) -> bool:
    return bool(plan) and (plan.get("precision") or {}).get("float16_pack") == "bf16"


def storage_error(dtype: str, plan) -> tuple[float, float]:
    """(relative, absolute) error of storing a value in dtype (see the module docstring)."""
    if dtype == "float32":
        return 0.0, 0.0
    if dtype == "bfloat16":
        return 2.0 ** -8, 2.0 ** -126
    if dtype == "float16":
        return (2.0 ** -8, 2.0 ** -14) if fp16_via_bf16(plan) else (2.0 ** -11, 2.0 ** -25)
    raise ValueError(dtype)


class Ar:
    """The arithmetic of the error model on Iv values; ``exact=True`` evaluates the reference (no rounding)."""

    def __init__(self, plan=None, exact=False):
        self.plan, self.exact = plan, exact

    def widen(self, x: Iv, rel: float, ab: float = 0.0) -> Iv:
        if self.exact:
            return x
        rel += SLOP
        return Iv(x.lo - rel * x.lo.abs() - ab, x.hi + rel * x.hi.abs() + ab)

    def store(self, x: Iv, dtype: str) -> Iv:
        return self.widen(x, *storage_error(dtype, self.plan)) if dtype != "float32" else self.widen(x, 0.0)

    def arith(self, x: Iv, dtype: str, ulps: float = 1) -> Iv:
        x = self.widen(x, ulps * U)
        return x if dtype in ("float32", "bool", "int32") else self.store(x, dtype)

    def const(self, c) -> Iv:
        return Iv(float(np.float32(c)))

    def add(self, a, b, dt="float32"):
        return self.arith(Iv(a.lo + b.lo, a.hi + b.hi), dt)

    def sub(self, a, b, dt="float32"):
        return self.arith(Iv(a.lo - b.hi, a.hi - b.lo), dt)

    def mul(self, a, b, dt="float32"):
        p = torch.stack(torch.broadcast_tensors(a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi))
        return self.arith(Iv(p.amin(0), p.amax(0)), dt)

    def div(self, a, b, dt="float32", ulps=None):
        lo_b, hi_b = torch.broadcast_tensors(b.lo, b.hi)
        assert bool(((lo_b > 0) | (hi_b < 0)).all()), "a divisor interval contains 0"
        q = torch.stack(torch.broadcast_tensors(a.lo / b.lo, a.lo / b.hi, a.hi / b.lo, a.hi / b.hi))
        return self.arith(Iv(q.amin(0), q.amax(0)), dt, FN_ULPS["div"] if ulps is None else ulps)

    def neg(self, a, dt="float32"):
        return self.arith(Iv(-a.hi, -a.lo), dt, 0)

    def abs(self, a, dt="float32"):
        lo = torch.where(a.lo >= 0, a.lo, torch.where(a.hi <= 0, -a.hi, torch.zeros_like(a.lo)))
        return self.arith(Iv(lo, torch.maximum(a.lo.abs(), a.hi.abs())), dt, 0)

    def maximum(self, a, b, dt="float32"):
        return self.arith(Iv(torch.maximum(a.lo, b.lo), torch.maximum(a.hi, b.hi)), dt, 0)

    def minimum(self, a, b, dt="float32"):
        return self.arith(Iv(torch.minimum(a.lo, b.lo), torch.minimum(a.hi, b.hi)), dt, 0)

    MONOTONE = {"exp": (torch.exp, True), "exp2": (torch.exp2, True), "log": (torch.log, True),
                "log2": (torch.log2, True), "sqrt": (torch.sqrt, True), "rsqrt": (torch.rsqrt, False),
                "recip": (torch.reciprocal, False), "tanh": (torch.tanh, True), "sigmoid": (torch.sigmoid, True),
                "erf": (torch.erf, True)}

    def fn(self, name, a, dt="float32"):
        f, increasing = self.MONOTONE[name]
        if name in ("log", "log2", "rsqrt", "recip"):
            assert bool((a.lo > 0).all()), f"{name} of an interval reaching 0"
        if name == "sqrt":
            assert bool((a.lo >= 0).all()), "sqrt of an interval below 0"
        lo, hi = (f(a.lo), f(a.hi)) if increasing else (f(a.hi), f(a.lo))
        return self.arith(Iv(lo, hi), dt, FN_ULPS[name])

    def pow(self, a, p: int, dt="float32"):
        base = self.abs(a) if p % 2 == 0 else a
        return self.arith(Iv(base.lo ** p, base.hi ** p), dt, FN_ULPS["pow"])

    def cmp(self, op, a, b):
        """(certainly true, certainly false) masks of ``a op b``."""
        if op in (">", ">="):
            return self.cmp("<" if op == ">" else "<=", b, a)
        if op == "<":
            return a.hi < b.lo, a.lo >= b.hi
        if op == "<=":
            return a.hi <= b.lo, a.lo > b.hi
        raise ValueError(op)

    def truth(self, c) -> Iv:
        ct, cf = c
        return Iv(ct.to(torch.float64), (~cf).to(torch.float64))

    def where(self, c, t, f, dt="float32"):
        ct, cf = c
        ct, cf, tlo, thi, flo, fhi = torch.broadcast_tensors(ct, cf, t.lo, t.hi, f.lo, f.hi)
        lo = torch.where(ct, tlo, torch.where(cf, flo, torch.minimum(tlo, flo)))
        hi = torch.where(ct, thi, torch.where(cf, fhi, torch.maximum(thi, fhi)))
        return self.arith(Iv(lo, hi), dt, 0)

    def reduce_sum(self, x, dim, init=None, n=None):
        """A float32 sum over dim (+ init): n terms in any order within n * u * sum|x|."""
        lo, hi = x.lo.sum(dim), x.hi.sum(dim)
        mag = torch.maximum(x.lo.abs(), x.hi.abs()).sum(dim)
        n = (x.lo.shape[dim] if n is None else n) + (init is not None)
        if init is not None:
            lo, hi, mag = lo + init.lo, hi + init.hi, mag + torch.maximum(init.lo.abs(), init.hi.abs())
        if self.exact:
            return Iv(lo, hi)
        e = n * U * mag
        return self.widen(Iv(lo - e, hi + e), 0.0)

    def reduce_max(self, x, dim, init=None):
        r = Iv(x.lo.amax(dim), x.hi.amax(dim))
        return r if init is None else self.maximum(r, init)

    def reduce_min(self, x, dim, init=None):
        r = Iv(x.lo.amin(dim), x.hi.amin(dim))
        return r if init is None else self.minimum(r, init)


def check_intervals(outputs) -> tuple:
    """outputs: [(name, tensor, Iv bound, reference)] -> (ok, max |out - ref|, widest allowed deviation, detail)."""
    ok, err, tol, detail, worst = True, 0.0, 0.0, "", -1.0
    for name, out, bound, ref in outputs:
        o = out.to(torch.float64)
        lo, hi, ref = (t.expand(o.shape) for t in torch.broadcast_tensors(bound.lo, bound.hi, ref))
        excess = torch.maximum(lo - o, o - hi).clamp(min=0)
        excess = torch.where(torch.isnan(o) | torch.isnan(lo) | torch.isnan(hi), torch.full_like(o, math.inf),
                             excess)
        d = (o - ref).abs()
        err = max(err, float(torch.nan_to_num(d, nan=math.inf).max()) if o.numel() else 0.0)
        tol = max(tol, float(torch.maximum(hi - ref, ref - lo).max()) if o.numel() else 0.0)
        if o.numel() and float(excess.max()) > 0:
            ok = False
            flat = int(torch.argmax(torch.nan_to_num(excess, nan=math.inf)))
            idx = tuple(int(v) for v in np.unravel_index(flat, tuple(o.shape)))
            if float(excess.reshape(-1)[flat]) > worst:
                worst = float(excess.reshape(-1)[flat])
                bad = int((excess > 0).sum())
                detail = (f"{name}{list(idx)} = {float(o[idx]):.9g} outside [{float(lo[idx]):.9g}, "
                          f"{float(hi[idx]):.9g}] (reference {float(ref[idx]):.9g}); {bad} of {o.numel()} elements "
                          f"of {name} outside their bounds")
    return ok, err, tol, detail


# ---------------------------------------------------------------------------------------------------------------
# Source text
# ---------------------------------------------------------------------------------------------------------------
class Src:
    def __init__(self):
        self.lines, self.depth = [], 0

    def __call__(self, line: str):
        self.lines.append("    " * self.depth + line)

    def block(self, head: str):
        self(head)
        return self

    def __enter__(self):
        self.depth += 1

    def __exit__(self, *exc):
        self.depth -= 1

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


_COMPILED: dict = {}


def compile_source(src: str, name: str):
    """exec the kernel source (registered with linecache, so TileLang's parser can read it back)."""
    key = (src, name)
    if key not in _COMPILED:
        fname = f"<random case {abs(hash(src)) % 10 ** 10}>"
        linecache.cache[fname] = (len(src), None, src.splitlines(True), fname)
        ns = {"T": T}
        exec(compile(src, fname, "exec"), ns)
        _COMPILED[key] = ns[name]
    return _COMPILED[key]


def _sched(s: Src, schedule):
    if schedule is not None:
        s("T.annotate_tt_schedule(" + ", ".join(f"{k}={v!r}" for k, v in schedule.items()) + ")")


def _kernel(s: Src, signature: str, kernel: str):
    """``@T.prim_func``, the def line and the ``with T.Kernel(...)`` line; the body continues two levels in."""
    s("@T.prim_func")
    s(signature)
    s.depth += 1
    s(kernel)
    s.depth += 1


def _prologue(s: Src, schedule, p, row: str):
    """The schedule annotation, and ``row = <row>`` when the spec let-binds the block's first row."""
    _sched(s, schedule)
    if p["let_row"]:
        s(f"row = {row}")


def _load(s: Src, at: str, frag: str, shared: str | None, to_frag: bool = True):
    """T.copy of a tensor block into the fragment, or into the shared buffer (then into the fragment)."""
    if shared is None:
        s(f"T.copy({at}, {frag})")
        return
    s(f"T.copy({at}, {shared})")
    if to_frag:
        s(f"T.copy({shared}, {frag})")


def _inputs(g, shape, dtype, scale=1.0, clip=4.0):
    """Seeded normal values clipped to [-clip, clip] (bounds the magnitudes the generator reasons about)."""
    return (torch.randn(*shape, generator=g).clamp(-clip, clip) * scale).to(TORCH[dtype])


def ceil_div(a, b):
    return -(-a // b)


# ---------------------------------------------------------------------------------------------------------------
# rows: RMSNorm / softmax / LayerNorm / online softmax / split-K RMSNorm in TileLang's example style
# ---------------------------------------------------------------------------------------------------------------
SCALE = 1.44269504   # log2(e), as TileLang's online softmax writes it


def rows_spec(rng) -> dict:
    op = rng.choice(["rmsnorm", "softmax", "softmax2", "layernorm", "online", "splitk"])
    p = dict(op=op, M=rng.choice(SIZES), N=rng.choice([32, 64, 96, 128, 256]), bm=rng.choice([1, 16, 32, 32, 64]),
             tin=rng.choice(FLOATS), tout=rng.choice(FLOATS), let_row=rng.random() < 0.5,
             let_t=rng.random() < 0.5, slice=rng.random() < 0.25, dead=rng.choice([None, None, "parallel", "reduce"]))
    p["load"] = rng.choice(["direct", "direct", "shared", "cast"])
    p["sdt_in"] = rng.choice([p["tin"], p["tin"], "float32", "bfloat16"])
    p["store"] = rng.choice(["frag", "shared", "parallel"])
    p["sdt_out"] = rng.choice([p["tout"], "float32", "bfloat16"])
    p["yfrag"] = rng.choice(["float32", "float32", p["tout"]])
    p["inplace"] = rng.random() < 0.4
    if op == "online":
        p["bm"] = rng.choice([1, 32])
        p["bn"] = rng.choice([n for n in (32, 64, p["N"]) if p["N"] % n == 0])
        p["tout"] = p["tin"]
    if op == "splitk":
        p["bk"] = rng.choice([n for n in (32, 64) if p["N"] % n == 0])
        p["sdt_in"] = rng.choice([p["tin"], "float32"])
    if op == "layernorm":
        p["bm"] = rng.choice([1, 32])
    let = " let" if p["let_row"] and op != "online" else ""
    dead = f" dead={p['dead']}" if p["dead"] and op in ("rmsnorm", "softmax", "softmax2", "layernorm") else ""
    detail = {"online": f" bn={p.get('bn')}", "layernorm": "", "splitk": f" shared={p['sdt_in']} bk={p.get('bk')}"}
    p["tag"] = f"{op} {p['tin']}->{p['tout']}" + detail.get(
        op, f" load={p['load']}/{p['sdt_in']} store={p['store']}/{p['sdt_out']}") + let + dead
    return p


def rows_source(p, schedule) -> str:
    op, M, N, bm = p["op"], p["M"], p["N"], p["bm"]
    if op == "layernorm":
        return _layernorm_source(p, schedule)
    if op == "online":
        return _online_source(p, schedule)
    if op == "splitk":
        return _splitk_source(p, schedule)
    tin, tout = p["tin"], p["tout"]
    R = "row" if p["let_row"] else "by * %d" % bm
    X_at = f"X[{R}:{R} + {bm}, :]" if p["slice"] else f"X[{R}, 0]"
    Y_at = f"Y[{R}:{R} + {bm}, :]" if p["slice"] else f"Y[{R}, 0]"
    s = Src()
    _kernel(s, f'def rows(X: T.Tensor(({M}, {N}), "{tin}"), Y: T.Tensor(({M}, {N}), "{tout}")):',
            f"with T.Kernel(T.ceildiv({M}, {bm}), threads=128) as by:")
    if p["load"] != "direct":
        s(f'X_s = T.alloc_shared(({bm}, {N}), "{p["sdt_in"]}")')
    s(f'x = T.alloc_fragment(({bm}, {N}), "float32")')
    s(f'stat = T.alloc_fragment(({bm},), "float32")')
    if op in ("softmax", "softmax2"):
        s(f'row_max = T.alloc_fragment(({bm},), "float32")')
    if op == "rmsnorm":
        s(f'sq = T.alloc_fragment(({bm}, {N}), "float32")')
    if op == "softmax2":
        s(f'e = T.alloc_fragment(({bm}, {N}), "float32")')
    target = "x"
    if not p["inplace"] and p["store"] != "parallel":
        s(f'y = T.alloc_fragment(({bm}, {N}), "{p["yfrag"]}")')
        target = "y"
    if p["store"] == "shared":
        s(f'Y_s = T.alloc_shared(({bm}, {N}), "{p["sdt_out"]}")')
    if p["dead"] == "parallel":
        s(f'unused = T.alloc_fragment(({bm}, {N}), "float32")')
    elif p["dead"] == "reduce":
        s(f'unused = T.alloc_fragment(({bm},), "float32")')
    _prologue(s, schedule, p, f"by * {bm}")
    _load(s, X_at, "x", None if p["load"] == "direct" else "X_s", p["load"] == "shared")
    if p["load"] == "cast":
        with s.block(f"for i, j in T.Parallel({bm}, {N}):"):
            s('x[i, j] = T.Cast("float32", X_s[i, j])')
    if p["dead"] == "parallel":
        with s.block(f"for i, j in T.Parallel({bm}, {N}):"):
            s("unused[i, j] = x[i, j] * 2.0 + 1.0")
    elif p["dead"] == "reduce":
        s("T.reduce_max(x, unused, dim=1)")
    if op == "rmsnorm":
        with s.block(f"for i, j in T.Parallel({bm}, {N}):"):
            s("sq[i, j] = x[i, j] * x[i, j]")
        s("T.reduce_sum(sq, stat, dim=1)")
        with s.block(f"for i in T.Parallel({bm}):"):
            s(f"stat[i] = T.rsqrt(stat[i] / {N} + 1e-6)")
        final = "x[i, j] * stat[i]"
    elif op == "softmax":
        s("T.reduce_max(x, row_max, dim=1)")
        with s.block(f"for i, j in T.Parallel({bm}, {N}):"):
            s("x[i, j] = T.exp(x[i, j] - row_max[i])")
        s("T.reduce_sum(x, stat, dim=1)")
        final = "x[i, j] / stat[i]"
    else:
        s("T.reduce_max(x, row_max, dim=1)")
        with s.block(f"for i, j in T.Parallel({bm}, {N}):"):
            s(f"e[i, j] = T.exp2(x[i, j] * {SCALE} - row_max[i] * {SCALE})")
        s("T.reduce_sum(e, stat, dim=1)")
        with s.block(f"for i in T.Parallel({bm}):"):
            s(f"stat[i] = row_max[i] * {SCALE} + T.log2(stat[i])")
        final = f"T.exp2(x[i, j] * {SCALE} - stat[i])"
    with s.block(f"for i, j in T.Parallel({bm}, {N}):"):
        if p["store"] == "parallel":
            if p["let_t"]:
                s(f"t = {R} + i")
            t = "t" if p["let_t"] else f"{R} + i"
            s(f'Y[{t}, j] = T.Cast("{tout}", {final})')
        else:
            s(f"{target}[i, j] = {final}")
    if p["store"] == "frag":
        s(f"T.copy({target}, {Y_at})")
    elif p["store"] == "shared":
        s(f"T.copy({target}, Y_s)")
        s(f"T.copy(Y_s, {Y_at})")
    return s.text()


def _layernorm_source(p, schedule) -> str:
    """TileLang's layernorm forward (examples/norm/layernorm.py) with the row let-bound or not."""
    M, N, bm, tin, tout = p["M"], p["N"], p["bm"], p["tin"], p["tout"]
    R = "row" if p["let_row"] else f"bx * {bm}"
    s = Src()
    _kernel(s, f'def layernorm(X: T.Tensor(({M}, {N}), "{tin}"), gamma: T.Tensor(({N},), "{tin}"), '
               f'beta: T.Tensor(({N},), "{tin}"), Y: T.Tensor(({M}, {N}), "{tout}"), '
               f'Mean: T.Tensor(({M},), "float"), Rstd: T.Tensor(({M},), "float")):',
            f"with T.Kernel(T.ceildiv({M}, {bm}), threads=256) as bx:")
    s(f'X_smem = T.alloc_shared(({bm}, {N}), "{tin}")')
    s(f'G_smem = T.alloc_shared(({N},), "{tin}")')
    s(f'B_smem = T.alloc_shared(({N},), "{tin}")')
    s(f'X_local = T.alloc_fragment(({bm}, {N}), "float")')
    s(f'X_sq_local = T.alloc_fragment(({bm}, {N}), "float")')
    for v in ("sum_row", "sumsq_row", "mean_row", "rstd_row"):
        s(f'{v} = T.alloc_fragment(({bm},), "float")')
    if p["dead"]:
        s(f'unused = T.alloc_fragment(({bm}, {N}), "float")')
    _prologue(s, schedule, p, f"bx * {bm}")
    s(f"T.copy(X[{R}, 0], X_smem)")
    s("T.copy(gamma, G_smem)")
    s("T.copy(beta, B_smem)")
    with s.block(f"for i, j in T.Parallel({bm}, {N}):"):
        s('X_local[i, j] = T.Cast("float", X_smem[i, j])')
    with s.block(f"for i, j in T.Parallel({bm}, {N}):"):
        s("X_sq_local[i, j] = X_local[i, j] * X_local[i, j]")
        if p["dead"]:
            s("unused[i, j] = X_local[i, j] - 1.0")
    s("T.reduce_sum(X_local, sum_row, dim=1)")
    s("T.reduce_sum(X_sq_local, sumsq_row, dim=1)")
    s(f'inv_D = T.float32(1.0) / T.Cast("float", {N})')
    with s.block(f"for i in T.Parallel({bm}):"):
        s("mean_row[i] = sum_row[i] * inv_D")
        s('rstd_row[i] = T.rsqrt(sumsq_row[i] * inv_D - mean_row[i] * mean_row[i] + T.Cast("float", 1e-05))')
        s(f"Mean[{R} + i] = mean_row[i]")
        s(f"Rstd[{R} + i] = rstd_row[i]")
    with s.block(f"for i, j in T.Parallel({bm}, {N}):"):
        s("norm = (X_local[i, j] - mean_row[i]) * rstd_row[i]")
        s(f'X_smem[i, j] = T.Cast("{tout}", norm * T.Cast("float", G_smem[j]) + T.Cast("float", B_smem[j]))')
    s(f"T.copy(X_smem, Y[{R}, 0])")
    return s.text()


def _online_source(p, schedule) -> str:
    """TileLang's online softmax (examples/online_softmax/online_softmax.py), its fragments in the input dtype."""
    M, N, bm, bn, dt = p["M"], p["N"], p["bm"], p["bn"], p["tin"]
    s = Src()
    _kernel(s, f'def online_softmax(X: T.Tensor(({M}, {N}), "{dt}"), Y: T.Tensor(({M}, {N}), "{dt}")):',
            f"with T.Kernel(T.ceildiv({M}, {bm}), threads=128) as i_m:")
    s(f'x = T.alloc_fragment([{bm}, {bn}], "{dt}")')
    s(f'y = T.alloc_fragment([{bm}, {bn}], "{dt}")')
    s(f'lse = T.alloc_fragment([{bm}], "float32")')
    s(f'max_x = T.alloc_fragment([{bm}], "{dt}")')
    s(f'exp_x = T.alloc_fragment([{bm}, {bn}], "float32")')
    s(f'sum_exp_x = T.alloc_fragment([{bm}], "float32")')
    _sched(s, schedule)
    s('T.fill(lse, -T.infinity("float32"))')
    with s.block(f"for i_n in T.Pipelined(T.ceildiv({N}, {bn})):"):
        s(f"T.copy(X[i_m * {bm}, i_n * {bn}], x)")
        s("T.reduce_max(x, max_x, dim=1, clear=True)")
        with s.block(f"for i, j in T.Parallel({bm}, {bn}):"):
            s(f"exp_x[i, j] = T.exp2(x[i, j] * {SCALE} - max_x[i] * {SCALE})")
        s("T.reduce_sum(exp_x, sum_exp_x, dim=1, clear=True)")
        with s.block(f"for i in T.Parallel({bm}):"):
            s(f"lse[i] = max_x[i] * {SCALE} + T.log2(T.exp2(lse[i] - max_x[i] * {SCALE}) + sum_exp_x[i])")
    with s.block(f"for i_n in T.Pipelined(T.ceildiv({N}, {bn})):"):
        s(f"T.copy(X[i_m * {bm}, i_n * {bn}], x)")
        with s.block(f"for i, j in T.Parallel({bm}, {bn}):"):
            s(f"y[i, j] = T.exp2(x[i, j] * {SCALE} - lse[i])")
        s(f"T.copy(y, Y[i_m * {bm}, i_n * {bn}])")
    return s.text()


def _splitk_source(p, schedule) -> str:
    """TileLang's rms_norm_splitk (examples/norm/rms_norm.py): the sum of squares accumulated over K blocks, then the
    reader's shared buffer scaled in place and stored, K blocks in reverse."""
    M, N, bm, bk, tin, tout, sdt = p["M"], p["N"], p["bm"], p["bk"], p["tin"], p["tout"], p["sdt_in"]
    nk = N // bk
    R = "row" if p["let_row"] else f"bx * {bm}"
    s = Src()
    _kernel(s, f'def rms_norm_splitk(A: T.Tensor(({M}, {N}), "{tin}"), B: T.Tensor(({M}, {N}), "{tout}")):',
            f"with T.Kernel(T.ceildiv({M}, {bm}), threads=128) as bx:")
    s(f'A_shared = T.alloc_shared(({bm}, {bk}), "{sdt}")')
    s(f'A_local = T.alloc_fragment(({bm}, {bk}), "float32")')
    s(f'A_powsum = T.alloc_fragment(({bm},), "float32")')
    _prologue(s, schedule, p, f"bx * {bm}")
    s("T.clear(A_local)")
    with s.block(f"for k in T.Serial({nk}):"):
        s(f"T.copy(A[{R}, k * {bk}], A_shared)")
        with s.block(f"for i, j in T.Parallel({bm}, {bk}):"):
            s("A_local[i, j] += A_shared[i, j] * A_shared[i, j]")
    s("T.reduce_sum(A_local, A_powsum, dim=1)")
    with s.block(f"for i in T.Parallel({bm}):"):
        s(f"A_powsum[i] = T.rsqrt(A_powsum[i] / {N} + 1e-12)")
    with s.block(f"for k in T.Serial({nk}):"):
        s(f"T.copy(A[{R}, ({nk} - 1 - k) * {bk}], A_shared)")
        with s.block(f"for i, j in T.Parallel({bm}, {bk}):"):
            s("A_shared[i, j] *= A_powsum[i]")
        s(f"T.copy(A_shared, B[{R}, ({nk} - 1 - k) * {bk}])")
    return s.text()


def col(v: Iv) -> Iv:
    """A per-row value broadcast along the row (``stat[i]`` in a 2-D T.Parallel)."""
    return v.map(lambda t: t[:, None])


def rows_check(p, seed):
    g = torch.Generator().manual_seed(seed)
    op, M, N = p["op"], p["M"], p["N"]
    x_t = _inputs(g, (M, N), p["tin"])
    args = [x_t]
    if op == "layernorm":
        gamma, beta = _inputs(g, (N,), p["tin"]), _inputs(g, (N,), p["tin"])
        args += [gamma, beta, torch.empty(M, N, dtype=TORCH[p["tout"]]), torch.empty(M), torch.empty(M)]
        outs = [3, 4, 5]
    else:
        args.append(torch.empty(M, N, dtype=TORCH[p["tout"]]))
        outs = [1]

    def model(ar: Ar):
        X = Iv(x_t)
        if op == "layernorm":
            x = ar.store(X, p["tin"])           # X_smem, then X_local = T.Cast("float", X_smem)
            sq = ar.mul(x, x)
            s1, s2 = ar.reduce_sum(x, 1), ar.reduce_sum(sq, 1)
            inv_d = ar.const(1.0 / N)
            mean = ar.mul(s1, inv_d)
            var = ar.sub(ar.mul(s2, inv_d), ar.mul(mean, mean))
            rstd = ar.fn("rsqrt", ar.add(var, ar.const(1e-5)))
            norm = ar.mul(ar.sub(x, col(mean)), col(rstd))
            y = ar.add(ar.mul(norm, Iv(gamma.double()[None])), Iv(beta.double()[None]))
            y = ar.store(ar.store(ar.store(y, p["tout"]), p["tin"]), p["tout"])
            return [y, mean, rstd]
        if op == "online":
            bn, c = p["bn"], ar.const(SCALE)
            lse = None
            for k in range(N // bn):
                xk = X.map(lambda t: t[:, k * bn:(k + 1) * bn])
                m = ar.reduce_max(xk, 1)        # exact, in the input dtype
                m_sc = ar.mul(m, c)
                e = ar.fn("exp2", ar.sub(ar.mul(xk, c), col(m_sc)))
                s_ = ar.reduce_sum(e, 1)
                if lse is None:                 # exp2(-inf - m * scale) = 0 exactly, and 0 + sum is exact
                    lse = ar.add(m_sc, ar.fn("log2", s_))
                else:
                    lse = ar.add(m_sc, ar.fn("log2", ar.add(ar.fn("exp2", ar.sub(lse, m_sc)), s_)))
            y = ar.fn("exp2", ar.sub(ar.mul(X, c), col(lse)))
            return [ar.store(y, p["tin"])]
        if op == "splitk":
            x = ar.store(X, p["sdt_in"])
            # A_shared * A_shared is a product of the shared buffer's dtype; nk sequential += then a bk-wide
            # reduce: N terms in all
            ss = ar.reduce_sum(ar.mul(x, x, p["sdt_in"]), 1)
            r = ar.fn("rsqrt", ar.add(ar.div(ss, ar.const(N)), ar.const(1e-12)))
            y = ar.mul(x, col(r))
            return [ar.store(ar.store(y, p["sdt_in"]), p["tout"])]
        x = ar.store(ar.store(X, p["sdt_in"]), "float32") if p["load"] != "direct" else X
        if op == "rmsnorm":
            ss = ar.reduce_sum(ar.mul(x, x), 1)
            r = ar.fn("rsqrt", ar.add(ar.div(ss, ar.const(N)), ar.const(1e-6)))
            y = ar.mul(x, col(r))
        elif op == "softmax":
            m = ar.reduce_max(x, 1)
            e = ar.fn("exp", ar.sub(x, col(m)))
            y = ar.div(e, col(ar.reduce_sum(e, 1)))
        else:
            c = ar.const(SCALE)
            m = ar.reduce_max(x, 1)
            e = ar.fn("exp2", ar.sub(ar.mul(x, c), col(ar.mul(m, c))))
            lse = ar.add(ar.mul(m, c), ar.fn("log2", ar.reduce_sum(e, 1)))
            y = ar.fn("exp2", ar.sub(ar.mul(x, c), col(lse)))
        if p["store"] == "parallel":
            return [ar.store(y, p["tout"])]
        if not p["inplace"]:
            y = ar.store(y, p["yfrag"])
        if p["store"] == "shared":
            y = ar.store(y, p["sdt_out"])
        return [ar.store(y, p["tout"])]

    names = ["Y", "Mean", "Rstd"]
    return args, outs, names, model


# ---------------------------------------------------------------------------------------------------------------
# reduce: float32 reductions at float32 bounds
# ---------------------------------------------------------------------------------------------------------------
def reduce_spec(rng) -> dict:
    kind = rng.choice(["sum", "sum", "max", "min", "abssum", "absmax"])
    p = dict(kind=kind, dim=rng.choice([1, 1, 0]), M=rng.choice(SIZES), N=rng.choice([32, 64, 96, 128, 256]),
             bm=rng.choice([32, 64]), tin=rng.choice(["float32", "float32", "bfloat16", "float16"]),
             data=rng.choice(["near1000", "mixed", "normal"]), load=rng.choice(["direct", "shared", "shared32"]),
             clear=True if kind in ("abssum", "absmax") else rng.random() < 0.6,
             tr=rng.choice(["float32", "float32", "float32", "bfloat16"]), dead=rng.random() < 0.2,
             let_row=rng.random() < 0.4)
    p["tag"] = (f"reduce_{kind} dim={p['dim']} clear={p['clear']} {p['tin']}->{p['tr']} {p['data']} "
                f"load={p['load']}{' dead' if p['dead'] else ''}")
    return p


def _reduce_len(p):
    return p["M"] if p["dim"] == 1 else ceil_div(p["M"], p["bm"]) * p["N"]


def reduce_source(p, schedule) -> str:
    M, N, bm, dim, kind = p["M"], p["N"], p["bm"], p["dim"], p["kind"]
    n = bm if dim == 1 else N
    L = _reduce_len(p)
    R = "row" if p["let_row"] else f"bx * {bm}"
    V = R if dim == 1 else f"bx * {N}"
    s = Src()
    _kernel(s, f'def reduce(A: T.Tensor(({M}, {N}), "{p["tin"]}"), Init: T.Tensor(({L},), "float32"), '
               f'R: T.Tensor(({L},), "{p["tr"]}")):',
            f"with T.Kernel(T.ceildiv({M}, {bm}), threads=128) as bx:")
    if p["load"] != "direct":
        s(f'A_s = T.alloc_shared(({bm}, {N}), "{p["tin"] if p["load"] == "shared" else "float32"}")')
    s(f'a = T.alloc_fragment(({bm}, {N}), "float32")')
    s(f'r = T.alloc_fragment(({n},), "float32")')
    if p["dead"]:
        s(f'unused = T.alloc_fragment(({n},), "float32")')
    _prologue(s, schedule, p, f"bx * {bm}")
    _load(s, f"A[{R}, 0]", "a", None if p["load"] == "direct" else "A_s")
    if not p["clear"]:
        s(f"T.copy(Init[{V}], r)")
    extra = "" if kind in ("abssum", "absmax") else f", clear={p['clear']}"
    s(f"T.reduce_{kind}(a, r, dim={dim}{extra})")
    if p["dead"]:
        s(f"T.reduce_sum(a, unused, dim={dim})")
    s(f"T.copy(r, R[{V}])")
    return s.text()


def reduce_check(p, seed):
    g = torch.Generator().manual_seed(seed)
    M, N, bm, dim = p["M"], p["N"], p["bm"], p["dim"]
    if p["data"] == "near1000":        # the rows: TF32 would be ~2.6e-4 off, float32 ~1e-7
        a = (1000.0 + torch.rand(M, N, generator=g, dtype=torch.float64)).float()
    elif p["data"] == "mixed":
        a = torch.randn(M, N, generator=g) * 100.0 - 30.0
    else:
        a = torch.randn(M, N, generator=g)
    a = a.to(TORCH[p["tin"]])
    L = _reduce_len(p)
    init = torch.randn(L, generator=g)
    out = torch.empty(L, dtype=TORCH[p["tr"]])
    nb = ceil_div(M, bm)

    def model(ar: Ar):
        x = Iv(a)
        if p["load"] == "shared32":
            x = ar.store(x, "float32")
        if dim == 0:      # the edge block's rows beyond M are zeros (T.copy zero-fills outside the tensor)
            pad = nb * bm - M
            x = x.map(lambda t: torch.nn.functional.pad(t, (0, 0, 0, pad)).view(nb, bm, N))
        ini = None if p["clear"] else (Iv(init) if dim == 1 else Iv(init.view(nb, N)))
        kind = p["kind"]
        if kind in ("abssum", "absmax"):
            x = ar.abs(x)
        if kind in ("sum", "abssum"):
            r = ar.reduce_sum(x, 1, ini)
        elif kind in ("max", "absmax"):
            r = ar.reduce_max(x, 1, ini)
        else:
            r = ar.reduce_min(x, 1, ini)
        return [ar.store(r.map(lambda t: t.reshape(-1)), p["tr"])]

    return [a, init, out], [2], ["R"], model


# ---------------------------------------------------------------------------------------------------------------
# expr: random element-wise expressions over tensors of mixed dtypes
# ---------------------------------------------------------------------------------------------------------------
class Node:
    dt: str = "float32"
    scalar = False

    def leaves(self) -> set:
        return set().union(*(c.leaves() for c in self.kids())) if self.kids() else set()

    def kids(self):
        return ()


class Leaf(Node):
    def __init__(self, name, scalar=False):
        self.name, self.scalar = name, scalar

    def src(self, env):
        return env[self.name][0]

    def tir(self, env):
        return env[self.name][1]

    def iv(self, ar, env):
        return env[self.name][2]

    def leaves(self):
        return {self.name}


class Const(Node):
    scalar = True

    def __init__(self, c):
        self.c = c

    def src(self, env):
        return repr(self.c)

    def tir(self, env):
        return self.c

    def iv(self, ar, env):
        return ar.const(self.c)


def _dt(e) -> str:
    return str(e.dtype) if hasattr(e, "dtype") else "float32"


def _conv(ar, x, kid, dt):
    """An operand converted to the node's dtype (TVM inserts the cast): a narrowing one rounds."""
    return ar.store(x, dt) if kid.dt != dt and dt in FLOATS else x


class Pair(Node):
    """A node of two operands."""

    def __init__(self, op, a, b):
        self.op, self.a, self.b = op, a, b
        self.scalar = a.scalar and b.scalar

    def kids(self):
        return (self.a, self.b)


class Bin(Pair):
    def src(self, env):
        return f"({self.a.src(env)} {self.op} {self.b.src(env)})"

    def tir(self, env):
        a, b = self.a.tir(env), self.b.tir(env)
        e = {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "/": lambda: a / b}[self.op]()
        self.dt = _dt(e)
        return e

    def iv(self, ar, env):
        a, b = (_conv(ar, k.iv(ar, env), k, self.dt) for k in (self.a, self.b))
        return {"+": ar.add, "-": ar.sub, "*": ar.mul, "/": ar.div}[self.op](a, b, self.dt)


POWERS = {"pow2": 2.0, "powh": 0.5}


class Unary(Node):
    """A node of one operand, ``a``."""

    def kids(self):
        return (self.a,)


class Fn(Unary):
    """T.<name>(a); ``neg`` is -(a), ``pow2`` T.pow(a, 2.0), ``powh`` T.pow(a, 0.5) (of a positive a)."""

    def __init__(self, name, a):
        self.name, self.a = name, a

    def src(self, env):
        a = self.a.src(env)
        if self.name == "neg":
            return f"(-{a})"
        if self.name.startswith("pow"):
            return f"T.pow({a}, {POWERS[self.name]})"
        return f"T.{self.name}({a})"

    def tir(self, env):
        a = self.a.tir(env)
        if self.name == "neg":
            e = -a
        elif self.name.startswith("pow"):
            e = T.pow(a, POWERS[self.name])
        else:
            e = getattr(T, self.name)(a)
        self.dt = _dt(e)
        return e

    def iv(self, ar, env):
        a = _conv(ar, self.a.iv(ar, env), self.a, self.dt)
        if self.name == "neg":
            return ar.neg(a, self.dt)
        if self.name == "abs":
            return ar.abs(a, self.dt)
        if self.name == "pow2":
            return ar.pow(a, 2, self.dt)
        if self.name == "powh":          # the compiler's sqrt_tile; libm powf within FN_ULPS["pow"] too
            return ar.arith(ar.fn("sqrt", a, "float32"), self.dt, FN_ULPS["pow"])
        return ar.fn(self.name, a, self.dt)


class MinMax(Pair):
    def src(self, env):
        return f"T.{self.op}({self.a.src(env)}, {self.b.src(env)})"

    def tir(self, env):
        e = getattr(T, self.op)(self.a.tir(env), self.b.tir(env))
        self.dt = _dt(e)
        return e

    def iv(self, ar, env):
        a, b = (_conv(ar, k.iv(ar, env), k, self.dt) for k in (self.a, self.b))
        return (ar.maximum if self.op == "max" else ar.minimum)(a, b, self.dt)


class Clamp(Unary):
    def __init__(self, a, lo, hi):
        self.a, self.lo, self.hi = a, lo, hi

    def src(self, env):
        return f"T.clamp({self.a.src(env)}, {self.lo!r}, {self.hi!r})"

    def tir(self, env):
        e = T.clamp(self.a.tir(env), self.lo, self.hi)
        self.dt = _dt(e)
        return e

    def iv(self, ar, env):
        a = _conv(ar, self.a.iv(ar, env), self.a, self.dt)
        return ar.minimum(ar.maximum(a, ar.const(self.lo), self.dt), ar.const(self.hi), self.dt)


class Cmp(Pair):
    """``a op b`` (a bool; used by Select, or as a value through Cast)."""

    def src(self, env):
        return f"{self.a.src(env)} {self.op} {self.b.src(env)}"

    def tir(self, env):
        a, b = self.a.tir(env), self.b.tir(env)
        e = {">": lambda: a > b, "<": lambda: a < b, ">=": lambda: a >= b, "<=": lambda: a <= b}[self.op]()
        self.common = _dt(e.a)          # the type both sides are converted to
        self.dt = "bool"
        return e

    def cond(self, ar, env):
        a, b = (_conv(ar, k.iv(ar, env), k, self.common) for k in (self.a, self.b))
        return ar.cmp(self.op, a, b)


class Select(Node):
    def __init__(self, c, t, f):
        self.c, self.t, self.f = c, t, f

    def kids(self):
        return (self.c, self.t, self.f)

    def src(self, env):
        return f"T.if_then_else({self.c.src(env)}, {self.t.src(env)}, {self.f.src(env)})"

    def tir(self, env):
        e = T.if_then_else(self.c.tir(env), self.t.tir(env), self.f.tir(env))
        self.dt = _dt(e)
        return e

    def iv(self, ar, env):
        t, f = (_conv(ar, k.iv(ar, env), k, self.dt) for k in (self.t, self.f))
        return ar.where(self.c.cond(ar, env), t, f, self.dt)


class Cast(Unary):
    def __init__(self, dtype, a):
        self.dtype, self.a = dtype, a

    def src(self, env):
        return f'T.Cast("{self.dtype}", {self.a.src(env)})'

    def tir(self, env):
        e = T.Cast(self.dtype, self.a.tir(env))
        self.dt = self.dtype
        return e

    def iv(self, ar, env):
        if isinstance(self.a, Cmp):
            return ar.truth(self.a.cond(ar, env))
        x = self.a.iv(ar, env)
        return ar.store(x, self.dtype) if self.dtype in FLOATS else x


BOUND_CAP = 1000.0
DST_TILES = 4      # DST holds 4 fp32 tiles per acquire: a bigger expression is refused (docs/usage.md: DST capacity)


def dst_need(n: Node, let=None) -> int:
    """DST tiles an expression needs when evaluated tile by tile (Sethi-Ullman, operands left to right, a scalar
    operand free except in a select): the generator keeps every statement within DST_TILES. A let-bound value
    counts as its expression."""
    if isinstance(n, Leaf):
        return dst_need(let, None) if n.name == "y" and let is not None else (0 if n.scalar else 1)
    if isinstance(n, Const):
        return 0
    if isinstance(n, Cast):
        return max(dst_need(n.a, let), 1)
    if isinstance(n, (Fn, Clamp)):
        return max(dst_need(n.a, let), 1)
    select = isinstance(n, Select)
    ops = [k for k in n.kids() if select or not k.scalar]
    return max([1] + [max(dst_need(k, let), 1 if select else 0) + i for i, k in enumerate(ops)])


def gen_fitting(rng, leaves, depth, scalars, let=None):
    """gen_expr until the expression fits DST (the depth shrinks after 10 tries)."""
    for attempt in range(40):
        node, bound = gen_expr(rng, leaves, depth if attempt < 10 else max(depth - 1, 0), scalars)
        if dst_need(node, let) <= DST_TILES:
            return node, bound
    return rng.choice(leaves)


def gen_expr(rng, leaves: list, depth: int, scalars: list) -> tuple:
    """A random expression over ``leaves`` [(Node, bound)] -> (Node, bound on |value|). ``scalars`` are scalar
    Leafs (kernel parameters) that may join a binary op with a tensor operand (never two scalars in one op)."""
    if depth == 0 or rng.random() < 0.2:
        return rng.choice(leaves)
    a, ba = gen_expr(rng, leaves, depth - 1, scalars)
    kind = rng.choice(["bin", "bin", "bin", "const", "const", "scalar", "fn", "fn", "div", "minmax", "select",
                       "clamp", "pow", "cast"])
    if kind == "scalar" and not scalars:
        kind = "const"
    if kind == "bin":
        b, bb = gen_expr(rng, leaves, depth - 1, scalars)
        op = rng.choice("+-*")
        node, bound = Bin(op, a, b), (ba * bb if op == "*" else ba + bb)
    elif kind in ("const", "scalar"):
        c = Const(rng.choice([0.5, 2.0, -1.5, 0.1, 3.0, 1.0])) if kind == "const" else rng.choice(scalars)
        cb = 3.0 if kind == "const" else 2.0
        op = rng.choice("+-*")
        node = Bin(op, a, c) if rng.random() < 0.5 else Bin(op, c, a)
        bound = ba * cb if op == "*" else ba + cb
    elif kind == "div":
        b, bb = gen_expr(rng, leaves, depth - 1, scalars)
        den = Bin("+", Fn("abs", b), Const(1.0)) if rng.random() < 0.5 else Bin("+", Bin("*", b, b), Const(0.5))
        node, bound = Bin("/", a, den), ba / 0.5
        if rng.random() < 0.3:
            node, bound = Bin("/", Const(1.0), den), 2.0
    elif kind == "fn":
        name = rng.choice(["exp", "exp2", "log", "log2", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "abs", "neg",
                           "gelu", "silu"])
        if name in ("exp", "exp2") and ba > 5.0:
            name = "tanh"
        if name == "gelu":          # GELU in erf form, as users write it (docs/usage.md)
            erf = Fn("erf", Bin("*", a, Const(0.7071067811865476)))
            node = Bin("*", Bin("*", Const(0.5), a), Bin("+", Const(1.0), erf))
            bound = ba
        elif name == "silu":
            node, bound = Bin("*", a, Fn("sigmoid", a)), ba
        elif name in ("log", "log2", "sqrt", "rsqrt"):
            arg = Bin("+", Fn("abs", a), Const(1.0)) if rng.random() < 0.5 else Bin("+", Bin("*", a, a), Const(0.5))
            node = Fn(name, arg)
            bound = {"log": math.log(ba * ba + 1.0) + 1.0, "log2": math.log2(ba * ba + 1.0) + 1.0,
                     "sqrt": ba + 1.0, "rsqrt": 1.5}[name]
        else:
            node = Fn(name, a)
            bound = {"exp": math.exp(ba), "exp2": 2.0 ** ba, "tanh": 1.0, "sigmoid": 1.0, "erf": 1.0}.get(name, ba)
    elif kind == "minmax":
        if rng.random() < 0.6:
            b, bb = gen_expr(rng, leaves, depth - 1, scalars)
        else:
            b, bb = Const(rng.choice([0.0, 0.5, -1.0])), 1.0
        node, bound = MinMax(rng.choice(["max", "min"]), a, b), max(ba, bb)
    elif kind == "select":
        b, bb = gen_expr(rng, leaves, depth - 1, scalars)
        rhs = Const(rng.choice([0.0, 0.5, -0.25])) if rng.random() < 0.5 else gen_expr(rng, leaves, 0, scalars)[0]
        f, fb = (b, bb) if rng.random() < 0.7 else (Const(rng.choice([0.0, -2.0])), 2.0)
        node, bound = Select(Cmp(rng.choice([">", "<", ">=", "<="]), a, rhs), a, f), max(ba, fb)
        if isinstance(f, Const) and rng.random() < 0.5:
            node = Cast("float32", Cmp(rng.choice([">", "<="]), a, rhs))
            bound = 1.0
    elif kind == "clamp":
        node, bound = Clamp(a, -1.0, 1.5), 1.5
    elif kind == "pow":              # constant powers: T.pow(x, 2.0), x * x * x, T.pow(|x| + 1, 0.5)
        pw = rng.choice([2, 3, 0.5])
        if pw == 0.5:
            node, bound = Fn("powh", Bin("+", Fn("abs", a), Const(1.0))), math.sqrt(ba + 1.0)
        elif ba > 10.0:
            node, bound = Fn("tanh", a), 1.0
        elif pw == 2:
            node, bound = Fn("pow2", a), ba ** 2
        else:
            node, bound = Bin("*", Bin("*", a, a), a), ba ** 3
    else:   # TT has no in-DST float16 rounding and refuses such a cast of a computed value (docs/usage.md): the
        # draw stays (every seed keeps its kernel's shape) and casts to bfloat16, which DST rounds to nearest even
        dtype = rng.choice(["bfloat16", "float32", "float16"])
        node, bound = Cast("bfloat16" if dtype == "float16" else dtype, a), ba
    if bound > BOUND_CAP:
        node, bound = Fn("tanh", node), 1.0
    return node, bound


def expr_spec(rng) -> dict:
    rank3 = rng.random() < 0.12
    dyn = not rank3 and rng.random() < 0.1
    small = not rank3 and rng.random() < 0.15
    bm, bn = (rng.choice([16, 32]), rng.choice([16, 32])) if small else (rng.choice([32, 64]), rng.choice([32, 64]))
    p = dict(M=rng.choice(SIZES), N=rng.choice(SIZES), bm=bm, bn=bn, batch=rng.choice([2, 3]) if rank3 else None,
             dyn=dyn, tc=rng.choice(FLOATS), let=rng.choice(["both", "both", "none", "row", "col"]),
             dead=rng.random() < 0.2)
    whole = bm % 32 == 0 and bn % 32 == 0
    ins = {"A": rng.choice(FLOATS), "B": rng.choice(FLOATS)}
    if rng.random() < 0.35 and not small:
        ins["v"] = rng.choice(FLOATS)            # row vector v[u]
    if rng.random() < 0.3 and not small:
        ins["w"] = rng.choice(FLOATS)            # column vector w[t]
    if rng.random() < 0.15 and whole and not rank3:
        ins["At"] = rng.choice(FLOATS)           # transposed: At[u, t]
    if rng.random() < 0.1 and not rank3:
        ins["Q"] = "uint8"
    p["ins"] = ins
    p["alpha"] = rng.random() < 0.3
    p["idx"] = whole and not rank3 and rng.random() < 0.2
    # staging: each 2-D input read straight from the tensor or through a shared / fragment buffer of any dtype
    p["stage"] = {k: (rng.choice(["shared", "fragment"]), rng.choice(FLOATS))
                  for k in ins if k in ("A", "B") and rng.random() < 0.5}
    if "v" in ins and rng.random() < 0.4:
        p["stage"]["v"] = ("shared", rng.choice(FLOATS))
    if "Q" in ins and rng.random() < 0.5:
        p["stage"]["Q"] = ("shared", "uint8")
    p["out"] = rng.choice(["direct", "direct", "fragment", "shared"])
    p["cf"] = rng.choice(FLOATS)
    p["cs"] = rng.choice(FLOATS)
    p["second"] = rng.random() < 0.25
    p["td"] = rng.choice(FLOATS)
    p["letval"] = rng.random() < 0.3
    p["tree_seed"] = rng.randrange(1 << 30)
    return p


def _expr_trees(p):
    """(y, e, e2, dead) expressions from the spec's seed; y is a let-bound value (or None)."""
    rng = random.Random(p["tree_seed"])
    leaves = [(Leaf(k), 4.0) for k in p["ins"] if k != "Q"]
    if "Q" in p["ins"]:
        leaves.append((Bin("*", Bin("-", Cast("float32", Leaf("Q")), Const(128.0)), Const(0.03125)), 4.0))
    if p["idx"]:
        leaves.append((Bin("*", Cast("float32", Leaf(rng.choice(["t", "u"]))), Const(0.015625)), 4.0))
    scalars = [Leaf("alpha", scalar=True)] if p["alpha"] else []
    y = None
    if p["letval"]:
        y, yb = gen_fitting(rng, leaves, 2, scalars)
        leaves = leaves + [(Leaf("y"), yb)]
    e, _ = gen_fitting(rng, leaves, 3, scalars, y)
    if p["idx"] and rng.random() < 0.5:       # a causal mask from the loop variables
        masked = Select(Cmp(">=", Leaf("t"), Leaf("u")), e, Const(0.0))
        e = masked if dst_need(masked, y) <= DST_TILES else e
    e2 = gen_fitting(rng, leaves, 2, scalars, y)[0] if p["second"] else None
    dead = gen_fitting(rng, leaves, 2, scalars, y)[0] if p["dead"] else None
    used = set().union(*(n.leaves() for n in (e, e2, y) if n is not None))
    if y is not None and "y" not in used:      # a let-bound value must be read
        fits = [c for c in (Bin("+", e, Leaf("y")), Bin("+", Leaf("y"), e)) if dst_need(c, y) <= DST_TILES]
        e = fits[0] if fits else Bin("*", Leaf("y"), Const(2.0))
        used = set().union(*(n.leaves() for n in (e, e2, y) if n is not None))
    return y, e, e2, dead, used


def expr_source(p, schedule) -> str:
    y, e, e2, dead, used = _expr_trees(p)
    used_all = used | (dead.leaves() if dead is not None else set())
    M, N, bm, bn, batch = p["M"], p["N"], p["bm"], p["bn"], p["batch"]
    Ms = "M" if p["dyn"] else str(M)
    lead = f"{batch}, " if batch else ""
    z = "bz, " if batch else ""
    tidx, uidx = f"by * {bm} + i", f"bx * {bn} + j"
    t = "t" if p["let"] in ("both", "row") else tidx
    u = "u" if p["let"] in ("both", "col") else uidx
    ins = {k: v for k, v in p["ins"].items() if k in used_all}
    shapes = {"A": f"({lead}{Ms}, {N})", "B": f"({lead}{Ms}, {N})", "Q": f"({lead}{Ms}, {N})",
              "At": f"({N}, {Ms})", "v": f"({N},)", "w": f"({Ms},)"}
    params = [f'{k}: T.Tensor({shapes[k]}, "{dt}")' for k, dt in ins.items()]
    params.append(f'C: T.Tensor(({lead}{Ms}, {N}), "{p["tc"]}")')
    if e2 is not None:
        params.append(f'D: T.Tensor(({lead}{Ms}, {N}), "{p["td"]}")')
    if "alpha" in used_all:
        params.append("alpha: T.float32")
    stage = {k: v for k, v in p["stage"].items() if k in ins}
    # the source text of each leaf (Leaf.src reads the first field of an env entry)
    text = {k: (f"{k}_s[j]" if k == "v" else f"{k}_s[i, j]") if k in stage else
            {"At": f"At[{u}, {t}]", "v": f"v[{u}]", "w": f"w[{t}]"}.get(k, f"{k}[{z}{t}, {u}]") for k in ins}
    text.update(t=t, u=u, alpha="alpha", y="y")
    env = {k: (v, None, None) for k, v in text.items()}
    s = Src()
    if p["dyn"]:
        s('M = T.dynamic("M")')
        s("")
    grid = f"T.ceildiv({N}, {bn}), T.ceildiv({Ms}, {bm})" + (f", {batch}" if batch else "")
    _kernel(s, f"def expr({', '.join(params)}):",
            f"with T.Kernel({grid}, threads=128) as (bx, by{', bz' if batch else ''}):")
    for k, (scope, dt) in stage.items():
        shape = f"({bn},)" if k == "v" else f"({bm}, {bn})"
        s(f'{k}_s = T.alloc_{scope}({shape}, "{dt}")')
    if p["out"] != "direct":
        s(f'c_f = T.alloc_fragment(({bm}, {bn}), "{p["cf"]}")')
    if p["out"] == "shared":
        s(f'C_s = T.alloc_shared(({bm}, {bn}), "{p["cs"]}")')
    if dead is not None:
        s(f'unused = T.alloc_fragment(({bm}, {bn}), "float32")')
    _sched(s, schedule)
    for k in stage:
        src = f"v[bx * {bn}]" if k == "v" else f"{k}[{z}by * {bm}, bx * {bn}]"
        s(f"T.copy({src}, {k}_s)")
    with s.block(f"for i, j in T.Parallel({bm}, {bn}):"):
        if t == "t":
            s(f"t = {tidx}")
        if u == "u":
            s(f"u = {uidx}")
        if y is not None:
            s(f"y = {y.src(env)}")
        if p["out"] == "direct":
            s(f'C[{z}{t}, {u}] = T.Cast("{p["tc"]}", {e.src(env)})')
        else:
            s(f'c_f[i, j] = {e.src(env)}')
        if e2 is not None:
            s(f'D[{z}{t}, {u}] = T.Cast("{p["td"]}", {e2.src(env)})')
        if dead is not None:
            s(f"unused[i, j] = {dead.src(env)}")
    at = f"C[{z}by * {bm}, bx * {bn}]"
    if p["out"] == "fragment":
        s(f"T.copy(c_f, {at})")
    elif p["out"] == "shared":
        s("T.copy(c_f, C_s)")
        s(f"T.copy(C_s, {at})")
    return s.text()


def expr_check(p, seed):
    from tvm import tirx

    y, e, e2, dead, used = _expr_trees(p)
    g = torch.Generator().manual_seed(seed)
    M, N, batch = p["M"], p["N"], p["batch"]
    lead = (batch,) if batch else ()
    ins = {k: v for k, v in p["ins"].items() if k in used | (dead.leaves() if dead is not None else set())}
    stage = {k: v for k, v in p["stage"].items() if k in ins}
    data, args = {}, []
    for k, dt in ins.items():
        shape = {"A": lead + (M, N), "B": lead + (M, N), "Q": lead + (M, N), "At": (N, M), "v": (N,), "w": (M,)}[k]
        data[k] = (torch.randint(0, 256, shape, generator=g, dtype=torch.uint8) if k == "Q"
                   else _inputs(g, shape, dt))
        args.append(data[k])
    outs, names = [len(args)], ["C"]
    args.append(torch.empty(*lead, M, N, dtype=TORCH[p["tc"]]))
    if e2 is not None:
        outs.append(len(args))
        names.append("D")
        args.append(torch.empty(*lead, M, N, dtype=TORCH[p["td"]]))
    alpha = 0.0
    if "alpha" in used | (dead.leaves() if dead is not None else set()):
        alpha = random.Random(seed).choice([1.5, -0.75, 0.3125, 2.0])
        args.append(alpha)
    # the dtype of every node, as TileLang's frontend types it (TVM's promotion rules)
    tenv = {}
    for k, dt in ins.items():
        tenv[k] = (None, tirx.Var(k, stage[k][1] if k in stage else dt), None)
    tenv.update(t=(None, tirx.Var("t", "int32"), None), u=(None, tirx.Var("u", "int32"), None),
                alpha=(None, tirx.Var("alpha", "float32"), None))
    if y is not None:
        tenv["y"] = (None, tirx.Var("y", _dt(y.tir(tenv))), None)
    for n in (e, e2):
        if n is not None:
            n.tir(tenv)

    def model(ar: Ar):
        env = {}
        for k in ins:
            x = Iv(data[k])
            if k in stage:
                x = ar.store(x, stage[k][1]) if stage[k][1] in FLOATS else x
            if k == "At":
                x = x.map(lambda v: v.T)
            elif k == "v":
                x = x.map(lambda v: v[None, :])
            elif k == "w":
                x = x.map(lambda v: v[:, None])
            env[k] = (None, None, x)
        rows = torch.arange(M, dtype=torch.float64)[:, None]
        cols = torch.arange(N, dtype=torch.float64)[None, :]
        env.update(t=(None, None, Iv(rows)), u=(None, None, Iv(cols)), alpha=(None, None, Iv(alpha)))
        if y is not None:
            env["y"] = (None, None, y.iv(ar, env))
        res = []
        c = e.iv(ar, env)
        if p["out"] == "direct":
            c = ar.store(c, p["tc"])
        else:
            c = ar.store(c, p["cf"])
            if p["out"] == "shared":
                c = ar.store(c, p["cs"])
            c = ar.store(c, p["tc"])
        res.append(c.map(lambda v: v.expand(*lead, M, N)))
        if e2 is not None:
            res.append(ar.store(e2.iv(ar, env), p["td"]).map(lambda v: v.expand(*lead, M, N)))
        return res

    return args, outs, names, model


# ---------------------------------------------------------------------------------------------------------------
# gemm2: GEMMs as users write them, with transposes, pipelining, epilogues and outputs of another dtype
# ---------------------------------------------------------------------------------------------------------------
def gemm2_spec(rng) -> dict:
    dt = rng.choice(["bfloat16", "float16"])
    p = dict(M=rng.choice(SIZES), N=rng.choice(SIZES), K=rng.choice(SIZES), bm=rng.choice([32, 64]),
             bn=rng.choice([32, 64]), bk=rng.choice([32, 64]), dt=dt, tc=rng.choice(FLOATS),
             ta=rng.random() < 0.25, tb=rng.random() < 0.3, loop=rng.choice(["serial", "pipelined"]),
             stages=rng.choice([1, 2, 3]), swizzle=rng.random() < 0.15, fill=rng.random() < 0.3,
             out=rng.choice(["copy", "copy", "shared", "parallel"]), cs=rng.choice(FLOATS),
             epi=rng.random() < 0.5, bias=rng.choice([None, "tensor", "shared"]), alpha=rng.random() < 0.3,
             tree_seed=rng.randrange(1 << 30), let_row=rng.random() < 0.4)
    target = {}
    if rng.random() < 0.2:
        target["max_cores"] = rng.choice([4, 16])
    if rng.random() < 0.2:
        target["packer_l1_acc"] = False
    p["target"] = target
    p["hifi4"] = dt == "bfloat16" and rng.random() < 0.2
    if not p["epi"]:
        p["bias"], p["alpha"] = None, False
    p["tag"] = (f"{dt}->{p['tc']}{' tA' if p['ta'] else ''}{' tB' if p['tb'] else ''} {p['loop']} out={p['out']}"
                f"{' epi' if p['epi'] else ''}")
    return p


def _gemm2_tree(p):
    rng = random.Random(p["tree_seed"])
    leaves = [(Leaf("acc"), 16.0 * math.sqrt(p["K"]) + 1.0)]
    if p["bias"]:
        leaves.append((Leaf("bias"), 4.0))
    scalars = [Leaf("alpha", scalar=True)] if p["alpha"] else []
    e, _ = gen_fitting(rng, leaves, 2, scalars)
    if "acc" not in e.leaves():
        e = Bin("+", Leaf("acc"), e) if dst_need(Bin("+", Leaf("acc"), e)) <= DST_TILES else Leaf("acc")
    return e


def gemm2_source(p, schedule) -> str:
    M, N, K_, bm, bn, bk, dt = p["M"], p["N"], p["K"], p["bm"], p["bn"], p["bk"], p["dt"]
    a_shape, b_shape = (f"({K_}, {M})" if p["ta"] else f"({M}, {K_})"), (f"({N}, {K_})" if p["tb"] else f"({K_}, {N})")
    R = "row" if p["let_row"] else f"by * {bm}"
    e = _gemm2_tree(p) if p["epi"] else None
    used = e.leaves() if e is not None else set()
    params = [f'A: T.Tensor({a_shape}, "{dt}")', f'B: T.Tensor({b_shape}, "{dt}")']
    if "bias" in used:
        params.append(f'bias: T.Tensor(({N},), "{dt}")')
    params.append(f'C: T.Tensor(({M}, {N}), "{p["tc"]}")')
    if "alpha" in used:
        params.append("alpha: T.float32")
    env = {"acc": ("C_l[i, j]", None, None), "alpha": ("alpha", None, None),
           "bias": ("bias_s[j]" if p["bias"] == "shared" else f"bias[bx * {bn} + j]", None, None)}
    s = Src()
    _kernel(s, f"def gemm({', '.join(params)}):",
            f"with T.Kernel(T.ceildiv({N}, {bn}), T.ceildiv({M}, {bm}), threads=128) as (bx, by):")
    s(f'A_s = T.alloc_shared({(bk, bm) if p["ta"] else (bm, bk)}, "{dt}")')
    s(f'B_s = T.alloc_shared({(bn, bk) if p["tb"] else (bk, bn)}, "{dt}")')
    s(f'C_l = T.alloc_fragment(({bm}, {bn}), "float32")')
    if "bias" in used and p["bias"] == "shared":
        s(f'bias_s = T.alloc_shared(({bn},), "{dt}")')
    if p["out"] == "shared":
        s(f'C_s = T.alloc_shared(({bm}, {bn}), "{p["cs"]}")')
    _sched(s, schedule)
    if p["hifi4"]:
        s('T.annotate_tt_compute(math_fidelity="HiFi4")')
    if p["swizzle"]:
        s("T.use_swizzle(panel_size=10)")
    if p["let_row"]:
        s(f"row = by * {bm}")
    s("T.fill(C_l, 0.0)" if p["fill"] else "T.clear(C_l)")
    loop = (f"T.Pipelined(T.ceildiv({K_}, {bk}), num_stages={p['stages']})" if p["loop"] == "pipelined"
            else f"T.serial(T.ceildiv({K_}, {bk}))")
    with s.block(f"for k in {loop}:"):
        s(f"T.copy(A[k * {bk}, {R}], A_s)" if p["ta"] else f"T.copy(A[{R}, k * {bk}], A_s)")
        s(f"T.copy(B[bx * {bn}, k * {bk}], B_s)" if p["tb"] else f"T.copy(B[k * {bk}, bx * {bn}], B_s)")
        flags = (", transpose_A=True" if p["ta"] else "") + (", transpose_B=True" if p["tb"] else "")
        s(f"T.gemm(A_s, B_s, C_l{flags})")
    if "bias" in used and p["bias"] == "shared":
        s(f"T.copy(bias[bx * {bn}], bias_s)")
    if e is not None and p["out"] != "parallel":
        with s.block(f"for i, j in T.Parallel({bm}, {bn}):"):
            s(f"C_l[i, j] = {e.src(env)}")
    if p["out"] == "copy":
        s(f"T.copy(C_l, C[{R}, bx * {bn}])")
    elif p["out"] == "shared":
        s("T.copy(C_l, C_s)")
        s(f"T.copy(C_s, C[{R}, bx * {bn}])")
    else:
        with s.block(f"for i, j in T.Parallel({bm}, {bn}):"):
            val = e.src(env) if e is not None else "C_l[i, j]"
            s(f'C[{R} + i, bx * {bn} + j] = T.Cast("{p["tc"]}", {val})')
    return s.text()


def gemm_error(a, b, dtype, hifi4=False):
    """Per element: the fidelity's dropped operand bits (bf16 HiFi2: in0's last mantissa bit, 2^-7 of |a||b|; fp16
    HiFi4: in1's 10th bit, 2^-10; bf16 HiFi4: exact) plus fp32 accumulation of K terms (K * u of sum |a||b|)."""
    trunc = 0.0 if hifi4 else {"bfloat16": 2.0 ** -7, "float16": 2.0 ** -10}[dtype]
    k = a.shape[-1]
    return (trunc + (k + 1) * U) * (a.double().abs() @ b.double().abs())


def gemm2_check(p, seed):
    from tvm import tirx

    g = torch.Generator().manual_seed(seed)
    M, N, K_, dt = p["M"], p["N"], p["K"], p["dt"]
    a = _inputs(g, (M, K_), dt)
    b = _inputs(g, (K_, N), dt, scale=1.0 / math.sqrt(K_))
    args = [a.T.contiguous() if p["ta"] else a, b.T.contiguous() if p["tb"] else b]
    e = _gemm2_tree(p) if p["epi"] else None
    used = e.leaves() if e is not None else set()
    bias = _inputs(g, (N,), dt)
    if "bias" in used:
        args.append(bias)
    args.append(torch.empty(M, N, dtype=TORCH[p["tc"]]))
    outs = [len(args) - 1]
    alpha = random.Random(seed).choice([1.5, -0.75, 0.3125, 2.0])
    if "alpha" in used:
        args.append(alpha)
    if e is not None:
        e.tir({"acc": (None, tirx.Var("acc", "float32"), None), "bias": (None, tirx.Var("bias", dt), None),
               "alpha": (None, tirx.Var("alpha", "float32"), None)})
    ref = a.double() @ b.double()
    err = gemm_error(a, b, dt, p["hifi4"])

    def model(ar: Ar):
        acc = Iv(ref) if ar.exact else Iv(ref - err, ref + err)
        c = acc
        if e is not None:
            env = {"acc": (None, None, acc), "bias": (None, None, Iv(bias.double()[None, :])),
                   "alpha": (None, None, Iv(alpha))}
            c = e.iv(ar, env)
            c = _conv(ar, c, e, "float32")
            if p["out"] != "parallel":
                c = ar.store(c, "float32")
        if p["out"] == "shared":
            c = ar.store(c, p["cs"])
        return [ar.store(c, p["tc"]).map(lambda v: v.expand(M, N))]

    return args, outs, ["C"], model


# ---------------------------------------------------------------------------------------------------------------
# Templates (the first generation)
# ---------------------------------------------------------------------------------------------------------------
def gemm(M, N, K_, bm, bn, bk, dtype, schedule):
    @T.prim_func
    def gemm_k(A: T.Tensor((M, K_), dtype), B: T.Tensor((K_, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), dtype)
            B_s = T.alloc_shared((bk, bn), dtype)
            C_l = T.alloc_fragment((bm, bn), "float32")
            if schedule is not None:
                T.annotate_tt_schedule(**schedule)
            T.clear(C_l)
            for k in T.serial(T.ceildiv(K_, bk)):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * bm, bx * bn])

    return gemm_k


def eltwise(M, N, bm, bn, dtype, schedule, op):
    fns = {"add": lambda a, b: a + b, "mul": lambda a, b: a * b, "sub": lambda a, b: a - b,
           "chain": lambda a, b: T.exp(a) * b + 1.0}
    fn = fns[op]

    @T.prim_func
    def elt(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            if schedule is not None:
                T.annotate_tt_schedule(**schedule)
            for i, j in T.Parallel(bm, bn):
                C[by * bm + i, bx * bn + j] = fn(A[by * bm + i, bx * bn + j], B[by * bm + i, bx * bn + j])

    return elt


def epilogue(M, N, K_, bm, bn, bk, dtype, schedule):
    @T.prim_func
    def epi(A: T.Tensor((M, K_), dtype), B: T.Tensor((K_, N), dtype), bias: T.Tensor((N,), dtype),
            C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), dtype)
            B_s = T.alloc_shared((bk, bn), dtype)
            C_l = T.alloc_fragment((bm, bn), "float32")
            if schedule is not None:
                T.annotate_tt_schedule(**schedule)
            T.clear(C_l)
            for k in T.serial(T.ceildiv(K_, bk)):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_l)
            for i, j in T.Parallel(bm, bn):
                C_l[i, j] = T.max(C_l[i, j] + bias[bx * bn + j], 0.0)
            T.copy(C_l, C[by * bm, bx * bn])

    return epi


SPECS = {"rows": rows_spec, "reduce": reduce_spec, "expr": expr_spec, "gemm2": gemm2_spec}
SOURCES = {"rows": rows_source, "reduce": reduce_source, "expr": expr_source, "gemm2": gemm2_source}
MODELS = {"rows": rows_check, "reduce": reduce_check, "expr": expr_check, "gemm2": gemm2_check}
# One period of 20 cases: the user-style kinds are 14 of them.
MIX = ["rows", "expr", "gemm", "reduce", "rows", "expr", "chained", "gemm2", "rows", "eltwise",
       "rows", "expr", "epilogue", "reduce", "rows", "expr", "bmm", "gemm2", "expr", "dgemm"]


def make_cases(n: int, seed: int) -> list[Case]:
    rng = random.Random(seed)
    cases = []
    for i in range(n):
        kind = MIX[i % len(MIX)]
        arch = rng.choice(["wormhole_b0", "blackhole"])
        schedule = rng.choice(POLICIES)
        if kind in SPECS:
            p = SPECS[kind](rng)
            if kind in ("rows", "reduce") and schedule is not None and schedule.get("policy") == "rect":
                schedule = None            # a 1-D grid
            if p.get("dyn"):
                schedule = None            # schedules other than contiguous need a static grid
            shape = tuple(p[k] for k in ("M", "N", "K") if k in p)
            block = tuple(p[k] for k in ("bm", "bn", "bk") if k in p)
            dtype = p.get("tin") or p.get("dt") or p.get("tc")
            cases.append(Case(kind, shape, block, dtype, schedule, arch, p.get("op", p.get("kind", "-")), p))
        elif kind == "epilogue":
            shape = tuple(rng.choice(SIZES) for _ in range(3))
            block = (rng.choice([32, 64]), rng.choice([32, 64]), rng.choice([32, 64]))
            cases.append(Case("epilogue", shape, block, rng.choice(["bfloat16", "float16"]), schedule, arch))
        elif kind == "chained":
            shape = (rng.choice(SIZES), rng.choice([32, 64]), rng.choice([32, 64, 96]))
            cases.append(Case("chained", shape, (32,), "bfloat16", None, arch))
        elif kind in ("gemm", "dgemm"):
            shape = tuple(rng.choice(SIZES) for _ in range(3))
            block = (rng.choice([32, 64]), rng.choice([32, 64]), rng.choice([32, 64]))
            if kind == "dgemm":
                block = (block[0],) * 3
                schedule = None
            cases.append(Case(kind, shape, block, rng.choice(["bfloat16", "float16"]), schedule, arch))
        elif kind == "bmm":
            shape = (rng.choice([1, 2, 3]), rng.choice(SIZES), rng.choice(SIZES), rng.choice(SIZES))
            block = (rng.choice([32, 64]), rng.choice([32, 64]), rng.choice([32, 64]))
            cases.append(Case("bmm", shape, block, rng.choice(["bfloat16", "float16"]), None, arch))
        else:
            shape = (rng.choice(SIZES), rng.choice(SIZES))
            block = (rng.choice([32, 64]), rng.choice([32, 64]))
            op = rng.choice(["add", "mul", "sub", "chain"])
            dtype = rng.choice(["float32", "bfloat16"])
            cases.append(Case("eltwise", shape, block, dtype, schedule, arch, op))
    return cases


def source(case: Case) -> str | None:
    """The TileLang source of a generated (user-style) case."""
    return SOURCES[case.kind](case.params, case.schedule) if case.kind in SOURCES else None


def build(case: Case):
    if case.kind in SOURCES:
        name = {"rows": {"layernorm": "layernorm", "online": "online_softmax", "splitk": "rms_norm_splitk"}
                .get(case.params.get("op"), "rows"), "reduce": "reduce", "expr": "expr", "gemm2": "gemm"}[case.kind]
        return compile_source(source(case), name)
    if case.kind == "gemm":
        M, N, K_ = case.shape
        return gemm(M, N, K_, *case.block, case.dtype, case.schedule)
    if case.kind == "dgemm":               # symbolic M (examples/kernels.py: dynamic_gemm)
        _, N, K_ = case.shape
        return K.dynamic_gemm(N, K_, case.dtype, case.block[0])
    if case.kind == "bmm":                 # rank-3 tensors, 3-D grid
        batch, M, N, K_ = case.shape
        return K.batched_gemm(batch, M, N, K_, *case.block, case.dtype)
    if case.kind == "epilogue":
        return epilogue(*case.shape, *case.block, case.dtype, case.schedule)
    if case.kind == "chained":     # the two-layer MLP of examples/kernels.py (hidden activation kept on chip)
        return K.mlp(*case.shape, case.block[0], case.dtype)
    return eltwise(*case.shape, *case.block, case.dtype, case.schedule, case.op)


def _in0_truncation(dtype: str, a, b) -> float:
    """The bound on a GEMM's error from the operand bits the math fidelity drops (TT_KERNEL_PATTERNS section 5.2,
    defaults in compute_config.py): bf16 at HiFi2 keeps 1 + 6 mantissa bits of in0 in SrcB (2^-7 relative per
    product); fp16 at HiFi4 keeps 1 + 4 + 5 bits of in1 in SrcA, one fewer than fp16's 10 (2^-10)."""
    rel = {"bfloat16": 2.0 ** -7, "float16": 2.0 ** -10}.get(dtype, 0.0)
    return rel * (a.float().abs() @ b.float().abs()).max().item() if rel else 0.0


def out_eps(dtype: str, plan) -> float:
    """Half an ulp of the output dtype, relative: bf16 2^-8; fp16 2^-11, or 2^-8 where the plan says an fp16 CB is
    packed through bf16 (fp32 accumulation: TT_KERNEL_PATTERNS.md 5b); fp32 2^-20 (a few fp32 roundings)."""
    if dtype == "bfloat16":
        return 2.0 ** -8
    if dtype == "float16":
        return 2.0 ** -8 if fp16_via_bf16(plan) else 2.0 ** -11
    return 2.0 ** -20


def _max_check(out, ref, tol):
    err = (out.float() - ref).abs().max().item()
    return err <= tol, err, tol, "" if err <= tol else f"max error {err} > tolerance {tol}"


def inputs_and_check(case: Case, seed: int):
    """(args, outputs, check) for one case: ``args`` the call's arguments, ``outputs`` the indices of the output
    tensors among them, ``check(args, plan) -> (ok, max error, tolerance, detail)`` after the call (``plan`` is the
    compiled kernel's plan: the fp16 packing it reports)."""
    if case.kind in MODELS:
        args, outs, names, model = MODELS[case.kind](case.params, seed)

        def check(args_after, plan=None):
            bounds, refs = model(Ar(plan)), model(Ar(plan, exact=True))
            return check_intervals([(names[k], args_after[i], bounds[k], refs[k].lo) for k, i in enumerate(outs)])

        return args, outs, check
    g = torch.Generator().manual_seed(seed)
    dt = getattr(torch, case.dtype)
    if case.kind in ("epilogue", "chained"):
        if case.kind == "epilogue":
            M, N, K_ = case.shape
            a, b = torch.randn(M, K_, generator=g).to(dt), torch.randn(K_, N, generator=g).to(dt)
            bias = torch.randn(N, generator=g).to(dt)
            ref = torch.relu(a.float() @ b.float() + bias.float())
            args = [a, b, bias, torch.empty(M, N, dtype=dt)]

            # fp32 accumulation, the bias added in fp32, one rounding of the output; at HiFi2 (bf16's default)
            # in0 reaches SrcB without its last mantissa bit (2^-7 relative)
            def tol(plan):
                return (2 * out_eps(case.dtype, plan) * max(ref.abs().max().item(), 1e-30)
                        + _in0_truncation(case.dtype, a, b) + 1e-6)
        else:
            M, D, H = case.shape
            x = torch.randn(M, D, generator=g).to(dt)
            w1 = (torch.randn(D, H, generator=g) / D ** 0.5).to(dt)
            w2 = (torch.randn(H, D, generator=g) / H ** 0.5).to(dt)
            hidden = torch.relu(x.float() @ w1.float()).to(dt).float()   # kept on chip in the kernel's dtype
            ref = hidden @ w2.float()
            args = [x, w1, w2, torch.empty(M, D, dtype=dt)]
            # the hidden activation can round the other way than torch's (fp32 sums in another order): allow
            # one bf16 ulp of each hidden value through W2, plus the output rounding; at HiFi2 in0 (x, then the
            # hidden activation) loses its last mantissa bit: 2^-7 |x||W1| through W2, 2^-7 |h||W2|
            trunc = 2.0 ** -7 if case.dtype == "bfloat16" else 0.0
            through = (x.float().abs() @ w1.float().abs()) @ w2.float().abs()

            def tol(plan):
                return ((2 * out_eps(case.dtype, plan) + trunc) * (hidden.abs() @ w2.float().abs()).max().item()
                        + trunc * through.max().item() + 1e-6)

        return args, [3], lambda out, plan=None: _max_check(out[3], ref, tol(plan))
    if case.kind in ("gemm", "dgemm", "bmm"):
        if case.kind == "bmm":
            batch, M, N, K_ = case.shape
            a, b = torch.randn(batch, M, K_, generator=g).to(dt), torch.randn(batch, K_, N, generator=g).to(dt)
        else:
            M, N, K_ = case.shape
            a, b = torch.randn(M, K_, generator=g).to(dt), torch.randn(K_, N, generator=g).to(dt)
        ref = a.double() @ b.double()
        out = torch.empty(ref.shape, dtype=dt)

        # per element: the fidelity's dropped bits and fp32 accumulation (gemm_error), one rounding of the output
        def check(args_after, plan=None):
            bound = gemm_error(a, b, case.dtype)
            ar = Ar(plan)
            iv = ar.store(Iv(ref - bound, ref + bound), case.dtype)
            return check_intervals([("C", args_after[2], iv, ref)])

        return [a, b, out], [2], check
    M, N = case.shape
    a, b = torch.randn(M, N, generator=g).to(dt), torch.randn(M, N, generator=g).to(dt)
    if case.op == "chain":
        ref = torch.exp(a.float()) * b.float() + 1
        eps = 2.0 ** -8 if case.dtype == "bfloat16" else 2.0 ** -20
        tol_ = 4 * eps * ref.abs().max().item() + 1e-5
    else:
        ref = {"add": a + b, "mul": a * b, "sub": a - b}[case.op].float()   # same rounding as torch
        tol_ = 0.0
    return [a, b, torch.empty(M, N, dtype=dt)], [2], lambda out, plan=None: _max_check(out[2], ref, tol_)


def run_case(case: Case, index: int, compile_fn=None):
    """Compile, run and check one case: (ok, error, tolerance, detail). Exceptions propagate."""
    import tilelang

    kernel = (compile_fn or tilelang.compile)(build(case), target=case.target())
    args, outs, check = inputs_and_check(case, seed=index)
    kernel(*args)
    return check(args, getattr(kernel, "plan", None))


if __name__ == "__main__":   # python -m examples.random_cases SEED INDEX [N]: print one case and its source
    seed, index = int(sys.argv[1]), int(sys.argv[2])
    n = int(sys.argv[3]) if len(sys.argv) > 3 else index + 1
    c = make_cases(n, seed)[index]
    print(c)
    print(c.params if c.params else "")
    print(source(c) or "(a template kind: see build())")
