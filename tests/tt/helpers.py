"""Shared test helpers: lower a kernel through the TT pipeline without the JIT layer."""

import tvm

from tilelang_tt.codegen import generate
from tilelang_tt.pipeline import lower_module
from tilelang_tt.target import make_options


def lower(func, **options):
    opts = make_options(**options)
    return lower_module(tvm.IRModule({"main": func}), opts)["main"], opts


def artifact(func, **options):
    """Generate (and write, so that the session's real-SDK check sees it) one kernel's artifact."""
    from tilelang_tt.codegen import write_artifact

    lowered, opts = lower(func, **options)
    art = generate(lowered, opts)
    art.directory = write_artifact(art.files, art.name)
    return art


def blocks_of(plan):
    """Every (by, bx) the plan's mapping assigns, with the owning core, recomputed from the plan alone."""
    from tilelang_tt.schedule import order_to_coord

    grid_y, grid_x = plan["grid"]
    order = plan["order"]
    k = int(order[len("block_linear("):-1]) if order.startswith("block_linear") else None
    out = []
    for m in plan["mapping"]:
        if plan["policy"] == "contiguous":
            ids = range(m["start_id"], m["start_id"] + m["count"])
        elif plan["policy"] == "strided":
            step = plan["schedule"]["common_args"]["step"]
            ids = [m["first_id"] + n * step for n in range(m["count"])]
        else:
            out += [((m["rect_y"] + q // m["rect_w"], m["rect_x"] + q % m["rect_w"]), tuple(m["core"]))
                    for q in range(m["count"])]
            continue
        out += [(order_to_coord(i, grid_y, grid_x, k), tuple(m["core"])) for i in ids]
    return out


def attention_ref(q, k, v, causal, layout):
    """torch's SDPA (fp32) on [batch, heads, seq, dim]; causal with K/V longer than Q aligns the last query
    with the last key (query i sees keys <= i + seq_kv - seq_q), as the kernel's past_len does."""
    import torch
    import torch.nn.functional as F

    if layout == "bshd":
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    mask = None
    if causal:
        sq, skv = q.shape[2], k.shape[2]
        mask = torch.arange(sq)[:, None] + (skv - sq) >= torch.arange(skv)[None, :]
    out = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=mask,
                                         enable_gqa=q.shape[1] != k.shape[1])
    return out.transpose(1, 2) if layout == "bshd" else out


def attention_error_bound(q, k, v, ref, causal, layout, fidelity="HiFi2", chunk=64):
    """Element-wise bound of a FlashAttention kernel's error against torch's SDPA, from the error model of the
    hardware (and the emulator; ../shared/reference/TT_KERNEL_PATTERNS.md section 5):

    * the probabilities are rounded to bf16 before P.V (as TileLang's example does in fp16): |dp| <= 2^-8 p;
    * at LoFi/HiFi2 a matmul's in0 operand reaches SrcB with 1 + 6 mantissa bits (a bf16 loses its last bit:
      up to 2^-7 relative): P in P.V (|dp| <= 2^-7 p more), Q in QK^T (|ds_ij| <= 2^-7 sum_d |q_id k_jd|);
    * the fp32 scores and row maxima reach the FPU as TF32 (2^-11 relative);
    * a score error ds moves p_ij = 2^(scale (s_ij - m_i)) by ln2 * scale * (|ds_ij| + |dm_i|) relatively, and
      |dm_i| <= max_j |ds_ij|; per row, both are at most max_j (2^-7 [HiFi2] * (|Q||K|^T)_ij + 2^-11 |s_ij|);
    * the output accumulator is rescaled through TF32 once per K/V chunk (2^-11 each) and rounded to bf16 at
      the end (2^-8 |out|).
    An error of r relative to every p of a row moves that row's output by at most r * sum_j p_j |v_j| =
    r * attention(|V|). Hence, per row i:
    |err| <= 2^-8 |ref| + attention(|V|) * (2^-8 [+ 2^-7] + 2 ln2 scale e_i + 2^-11 chunks),
    e_i = max_j ([2^-7 (|Q||K|^T)_ij +] 2^-11 |s_ij|). Worst cases, so loose; a HiFi4 run has no [terms].
    (Decode steps average hundreds of values: a bound relative to max|ref| alone would be meaningless there.)"""
    import math

    truncated = fidelity in ("LoFi", "HiFi2")
    qh, kh = (t.transpose(1, 2) if layout == "bshd" else t for t in (q, k))
    kh = kh.float().repeat_interleave(qh.shape[1] // kh.shape[1], dim=1)
    scores = qh.float() @ kh.transpose(-1, -2)
    e = 2.0 ** -11 * scores.abs()
    if truncated:
        e = e + 2.0 ** -7 * (qh.float().abs() @ kh.abs().transpose(-1, -2))
    e_row = e.amax(dim=-1, keepdim=True)                       # [B, H, Sq, 1]
    scale = q.shape[-1] ** -0.5 * math.log2(math.e)
    chunks = -(-kh.shape[2] // chunk)
    rel = 2.0 ** -8 + (2.0 ** -7 if truncated else 0.0) + 2 * math.log(2) * scale * e_row + 2.0 ** -11 * chunks
    if layout == "bshd":
        rel = rel.transpose(1, 2)
    return 2.0 ** -8 * ref.abs() + rel * attention_ref(q, k, v.abs(), causal, layout)


def gemm_error_bound(a, b, fidelity="HiFi2"):
    """Element-wise bound of a bf16 ``T.gemm`` with an fp32 accumulator and a bf16 output against a @ b in fp32
    (docs/usage.md, Precision): at LoFi/HiFi2 in0 reaches SrcB with 7 of its 8 significant bits, so each product
    may lose 2^-7 of itself (2^-7 (|a| @ |b|)); the fp32 sums add ~K 2^-24 of the same; the bf16 output rounds
    once (2^-8 |a @ b|)."""
    ref = a.float() @ b.float()
    terms = a.float().abs() @ b.float().abs()
    truncated = 2.0 ** -7 if fidelity in ("LoFi", "HiFi2") else 0.0
    return 2.0 ** -8 * ref.abs() + (truncated + a.shape[-1] * 2.0 ** -24) * terms


def run_attention(batch, heads, kv_heads, seq_q, seq_kv, dim, causal, layout, arch, max_cores, seed=0, **kw):
    """examples/kernels.py flash_attention compiled for (arch, max_cores) and run on random bf16 Q, K, V; its output
    checked against torch's SDPA within ``attention_error_bound``. The kernel, for its plan and counters."""
    import tilelang
    import torch

    from examples import kernels as K

    torch.manual_seed(seed)
    q_shape = (batch, seq_q, heads, dim) if layout == "bshd" else (batch, heads, seq_q, dim)
    kv_shape = (batch, seq_kv, kv_heads, dim) if layout == "bshd" else (batch, kv_heads, seq_kv, dim)
    q = torch.randn(q_shape, dtype=torch.bfloat16)
    k, v = (torch.randn(kv_shape, dtype=torch.bfloat16) for _ in range(2))
    o = torch.empty_like(q)
    kernel = tilelang.compile(K.flash_attention(batch, heads, seq_q, seq_kv, dim, kv_heads=kv_heads,
                                                is_causal=causal, layout=layout, **kw),
                              target={"kind": "tt", "arch": arch, "max_cores": max_cores})
    kernel(q, k, v, o)
    ref = attention_ref(q, k, v, causal, layout)
    bound = attention_error_bound(q, k, v, ref, causal, layout, fidelity=kernel.plan["math_fidelity"],
                                  chunk=kernel.plan["sdpa"]["k_chunk_tiles"] * 32)
    excess = ((o.float() - ref).abs() - bound).max().item()
    assert excess <= 0, f"error exceeds the bound by {excess}"
    return kernel


def broken_copy(artifact_dir, dest, rel, old, new):
    """A copy of an artifact at ``dest`` with ``old`` (which must occur once in ``rel``) replaced by ``new``: a
    seeded bug for the emulator's checks."""
    import shutil
    from pathlib import Path

    shutil.copytree(artifact_dir, dest)
    path = Path(dest) / rel
    text = path.read_text()
    assert text.count(old) == 1, f"{old!r} not found once in {rel}"
    path.write_text(text.replace(old, new))
    return dest


def one_block_gemm(size, block_k):
    """C = A @ B in one size x size block (one core), bf16 in and out, an fp32 accumulator, K in one step."""
    import tilelang.language as T

    @T.prim_func
    def gemm(A: T.Tensor((size, block_k), "bfloat16"), B: T.Tensor((block_k, size), "bfloat16"),
             C: T.Tensor((size, size), "bfloat16")):
        with T.Kernel(1, 1, threads=128) as (bx, by):
            A_s = T.alloc_shared((size, block_k), "bfloat16")
            B_s = T.alloc_shared((block_k, size), "bfloat16")
            C_l = T.alloc_fragment((size, size), "float32")
            T.clear(C_l)
            for k in T.serial(1):
                T.copy(A[by * size, k * block_k], A_s)
                T.copy(B[k * block_k, bx * size], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * size, bx * size])

    return gemm


def bf16_away(x):
    """The packer's fp32 -> bf16: nearest, ties away from zero (finite normal values), as float32 values."""
    import torch

    u = x.float().contiguous().view(torch.int32)
    s = u & torch.tensor(-2 ** 31, dtype=torch.int32)
    mag = (u & 0x7FFFFFFF) + 0x8000
    return ((s | mag) & ~0xFFFF).view(torch.float32)
