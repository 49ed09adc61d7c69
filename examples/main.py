"""Main job: compile the reference kernels for Tenstorrent, run them, and check them against torch.

Compiles the design's GEMM (bf16, 32x32 blocks), TileLang's example GEMM (128x128x32 blocks, transpose_B,
fp16 in / fp32 accumulate, T.Pipelined, T.use_swizzle) and elementwise kernels (fp32 and bf16, plus a
fused exp(a) * b + 1 chain), and TileLang's everyday kernels (softmax, layernorm and rms_norm in the form of
TileLang's examples, GEMV, a rank-3 batched GEMM, a GEMM with a bias + ReLU epilogue, a two-layer MLP and
FlashAttention forward), GEMMs with block-float (Bfp8_b, Bfp4_b), int8, uint8 and packed int4 dequantized weights
(examples/dequant_kernels.py) for wormhole_b0 and blackhole, prints each per-core plan and the artifact
directory, runs the exact generated host program and kernels on tt-sim (the CPU emulator; no Tenstorrent
device here) and prints the max error against torch, and checks every artifact against the real TT-Metalium
0.81 headers and libtt_metal.so.
"""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TILELANG_TT_ARTIFACT_DIR", str(ROOT / "tt_artifacts"))

import tilelang  # noqa: E402
import torch  # noqa: E402

import tilelang_tt  # noqa: E402,F401
from examples import dequant_kernels as D  # noqa: E402
from examples import kernels as K  # noqa: E402
from tilelang_tt.realcheck import check_artifact  # noqa: E402
from tilelang_tt.summary import plan_summary  # noqa: E402

def gemm_inputs(M, N, K_, dtype, transpose_b=False):
    a = torch.randn(M, K_, dtype=dtype)
    b = torch.randn(N, K_, dtype=dtype) if transpose_b else torch.randn(K_, N, dtype=dtype)
    ref = a.float() @ (b.float().T if transpose_b else b.float())
    return [a, b, torch.empty(M, N, dtype=dtype)], ref


def eltwise_inputs(M, N, dtype, fn):
    a, b = torch.randn(M, N, dtype=dtype), torch.randn(M, N, dtype=dtype)
    return [a, b, torch.empty(M, N, dtype=dtype)], fn(a.float(), b.float())


def softmax_inputs(M, N):
    x = torch.randn(M, N, dtype=torch.bfloat16)
    return [x, torch.empty_like(x)], torch.softmax(x.float(), dim=1)


def layernorm_inputs(N, D, eps=1e-5):
    x, g, b = (torch.randn(*s, dtype=torch.bfloat16) for s in ((N, D), (D,), (D,)))
    xf = x.float()
    refs = {3: torch.nn.functional.layer_norm(xf, (D,), g.float(), b.float(), eps=eps), 4: xf.mean(-1),
            5: torch.rsqrt(xf.var(-1, unbiased=False) + eps)}
    return [x, g, b, torch.empty_like(x), torch.empty(N), torch.empty(N)], refs


def rms_norm_inputs(M, N):
    a = torch.randn(M, N)
    # TileLang's example computes rsqrt(mean(x^2)) + 1e-12 (its reference adds eps inside; both agree here)
    return [a, torch.empty_like(a)], a * (torch.rsqrt(a.pow(2).mean(-1, keepdim=True)) + 1e-12)


def gemv_inputs(N, K_):
    x, w = torch.randn(K_, dtype=torch.bfloat16), torch.randn(N, K_, dtype=torch.bfloat16)
    return [x, w, torch.empty(N, dtype=torch.bfloat16)], w.float() @ x.float()


def bmm_inputs(B, M, N, K_):
    a, b = torch.randn(B, M, K_, dtype=torch.bfloat16), torch.randn(B, K_, N, dtype=torch.bfloat16)
    return [a, b, torch.empty(B, M, N, dtype=torch.bfloat16)], torch.bmm(a.float(), b.float())


def bias_relu_inputs(M, N, K_):
    a, b, bias = torch.randn(M, K_, dtype=torch.bfloat16), torch.randn(K_, N, dtype=torch.bfloat16), \
        torch.randn(N, dtype=torch.bfloat16)
    return [a, b, bias, torch.empty(M, N, dtype=torch.bfloat16)], torch.relu(a.float() @ b.float() + bias.float())


def mlp_inputs(M, D, H):
    x = torch.randn(M, D, dtype=torch.bfloat16)
    w1, w2 = (torch.randn(*s, dtype=torch.bfloat16) / s[0] ** 0.5 for s in ((D, H), (H, D)))
    hidden = torch.relu(x.float() @ w1.float()).bfloat16().float()    # the kernel keeps it as bf16 on chip
    return [x, w1, w2, torch.empty(M, D, dtype=torch.bfloat16)], hidden @ w2.float()


def attention_inputs(B, H, HKV, S, D, causal=False):
    q = torch.randn(B, H, S, D, dtype=torch.bfloat16)
    k, v = (torch.randn(B, HKV, S, D, dtype=torch.bfloat16) for _ in range(2))
    ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), enable_gqa=HKV != H,
                                                           is_causal=causal)
    return [q, k, v, torch.empty_like(q)], ref


def bfp_gemm_inputs(M, N, K_, fmt):
    """bf16 A x B stored as ``fmt``: the reference multiplies by the weights as stored (tt-metal's host
    rounding), so the printed error is the kernel's, not the format's."""
    from tilelang_tt.blockfloat import quantize

    a, b = torch.randn(M, K_, dtype=torch.bfloat16), torch.randn(K_, N, dtype=torch.bfloat16)
    stored = torch.from_numpy(quantize(b.float().numpy(), fmt))
    return [a, b, torch.empty(M, N, dtype=torch.bfloat16)], a.float() @ stored


def dequant_int8_inputs(M, N, K_):
    """int8 weights B[N, K] with per-output-channel scales: C = A @ (B * scale[:, None])^T."""
    a = torch.randn(M, K_, dtype=torch.bfloat16)
    b = torch.randint(-127, 128, (N, K_), dtype=torch.int8)
    scale = (torch.rand(N) * 0.02 + 0.005).to(torch.bfloat16)
    ref = a.float() @ (b.float() * scale.float()[:, None]).to(torch.bfloat16).float().T
    return [a, b, scale, torch.empty(M, N, dtype=torch.bfloat16)], ref


def dequant_uint8_inputs(M, N, K_):
    """uint8 weights B[N, K] (a UInt8 tensor, cast on the SFPU) with per-channel zero points and scales:
    C = A @ ((B - Zero[:, None]) * Scale[:, None])^T."""
    a = torch.randn(M, K_, dtype=torch.bfloat16)
    b = torch.randint(0, 256, (N, K_), dtype=torch.uint8)
    zero = torch.randint(100, 156, (N,)).to(torch.bfloat16)
    scale = (torch.rand(N) * 0.02 + 0.001).to(torch.bfloat16)
    ref = a.float() @ ((b.float() - zero.float()[:, None]) * scale.float()[:, None]).T
    return [a, b, zero, scale, torch.empty(M, N, dtype=torch.bfloat16)], ref


def dequant_int4_inputs(M, N, K_, g):
    """Packed uint4 weights B[K, N // 2] (low nibble first) with per-group zero points and scales [K // g, N]:
    C = A @ ((B - Zeros) * Scale)."""
    a = torch.randn(M, K_, dtype=torch.bfloat16)
    qb = torch.randint(0, 256, (K_, N // 2), dtype=torch.uint8)
    scale = (torch.rand(K_ // g, N) * 0.02 + 0.005).to(torch.bfloat16)
    zeros = torch.randint(6, 10, (K_ // g, N)).to(torch.bfloat16)
    q = qb.to(torch.int16)
    w = torch.stack([q & 15, q >> 4], dim=2).flatten(1, 2).float()
    ref = a.float() @ ((w - zeros.float().repeat_interleave(g, 0)) * scale.float().repeat_interleave(g, 0))
    return [a, qb, scale, zeros, torch.empty(M, N, dtype=torch.bfloat16)], ref


def paged_decode_inputs(B, H, D, BS, MAXB, NB):
    """Random K/V caches of NB blocks and a block table naming MAXB distinct blocks per sequence."""
    import math

    q = torch.randn(B, H, D, dtype=torch.bfloat16)
    k, v = (torch.randn(NB * BS, D, dtype=torch.bfloat16) for _ in range(2))
    table = torch.stack([torch.randperm(NB)[:MAXB] for _ in range(B)]).int()
    kk, vv = (t.view(NB, BS, D)[table.long()].reshape(B, MAXB * BS, D).float() for t in (k, v))
    ref = torch.softmax(q.float() @ kk.transpose(1, 2) / math.sqrt(D), -1) @ vv
    return [q, k, v, table, torch.empty(B, H, D, dtype=torch.bfloat16)], ref


def conv_inputs(N, C, H, W, F, K, S, D, P):
    import torch.nn.functional as Fn

    a, b = torch.randn(N, H, W, C, dtype=torch.bfloat16), torch.randn(K, K, C, F, dtype=torch.bfloat16)
    ref = Fn.conv2d(a.float().permute(0, 3, 1, 2), b.float().permute(3, 2, 0, 1), stride=S, padding=P,
                    dilation=D).permute(0, 2, 3, 1)
    return [a, b, torch.empty(*ref.shape, dtype=torch.bfloat16)], ref


def moe_inputs(M, N, K_, E, bm):
    a, w = torch.randn(M, K_, dtype=torch.bfloat16), torch.randn(E, K_, N, dtype=torch.bfloat16)
    experts = torch.randint(0, E, (M // bm,), dtype=torch.int32)
    ref = torch.cat([a[i * bm:(i + 1) * bm].float() @ w[experts[i]].float() for i in range(M // bm)])
    return [a, w, experts, torch.empty(M, N, dtype=torch.bfloat16)], ref


CASES = [
    ("design GEMM 512x512x512 bf16", lambda: K.design_gemm(512, 512, 512),
     lambda: gemm_inputs(512, 512, 512, torch.bfloat16)),
    ("TileLang example GEMM 1024^3 fp16/fp32", lambda: K.tilelang_example_gemm(1024, 1024, 1024),
     lambda: gemm_inputs(1024, 1024, 1024, torch.float16, transpose_b=True)),
    ("elementwise add 1024x1024 fp32", lambda: K.elementwise_add(1024, 1024, "float32"),
     lambda: eltwise_inputs(1024, 1024, torch.float32, lambda a, b: a + b)),
    ("elementwise add 1024x1024 bf16", lambda: K.elementwise_add(1024, 1024, "bfloat16"),
     lambda: eltwise_inputs(1024, 1024, torch.bfloat16, lambda a, b: a + b)),
    ("fused exp(a)*b+1 128x128 bf16", lambda: K.fused_chain(128, 128),
     lambda: eltwise_inputs(128, 128, torch.bfloat16, lambda a, b: torch.exp(a) * b + 1)),
    ("softmax 256x512 bf16 (fp32 statistics)", lambda: K.softmax(256, 512), lambda: softmax_inputs(256, 512)),
    ("layernorm 256x512 bf16, gamma/beta, mean/rstd out (TileLang example, 1 row/block)",
     lambda: K.layernorm(256, 512), lambda: layernorm_inputs(256, 512)),
    ("rms_norm 256x512 fp32 (TileLang example, blk_m=1)", lambda: K.rms_norm(256, 512, 1),
     lambda: rms_norm_inputs(256, 512)),
    ("GEMV 256x512 bf16", lambda: K.gemv(256, 512), lambda: gemv_inputs(256, 512)),
    ("batched GEMM 4x128x128x128 bf16 (rank 3, 3-D grid)", lambda: K.batched_gemm(4, 128, 128, 128),
     lambda: bmm_inputs(4, 128, 128, 128)),
    ("GEMM + bias + ReLU 256^3 bf16 (on-chip epilogue)", lambda: K.gemm_bias_relu(256, 256, 256),
     lambda: bias_relu_inputs(256, 256, 256)),
    ("two-layer MLP 256x128x256 bf16 (hidden kept on chip)", lambda: K.mlp(256, 128, 256),
     lambda: mlp_inputs(256, 128, 256)),
    ("FlashAttention fwd 1x4x256x64 bf16, GQA 4:2 (TileLang example form)",
     lambda: K.flash_attention(1, 4, 256, 256, 64, kv_heads=2), lambda: attention_inputs(1, 4, 2, 256, 64)),
    ("FlashAttention fwd causal 1x2x256x128 bf16 (TileLang example form)",
     lambda: K.flash_attention(1, 2, 256, 256, 128, is_causal=True),
     lambda: attention_inputs(1, 2, 2, 256, 128, causal=True)),
    ("GEMM 256^3 bf16 x Bfp8_b weights (HiFi2)", lambda: D.bfp_gemm(256, 256, 256, "Bfp8_b"),
     lambda: bfp_gemm_inputs(256, 256, 256, "Bfp8_b")),
    ("GEMM 256^3 bf16 x Bfp4_b weights (LoFi)", lambda: D.bfp_gemm(256, 256, 256, "Bfp4_b", math_fidelity="LoFi"),
     lambda: bfp_gemm_inputs(256, 256, 256, "Bfp4_b")),
    ("dequant GEMM 128x128x256, int8 weights, per-channel scales (TileLang example form)",
     lambda: D.dequant_gemm_int8(128, 128, 256), lambda: dequant_int8_inputs(128, 128, 256)),
    ("dequant GEMM 128x128x256, uint8 weights (UInt8 tensor, typecast on the SFPU), per-channel zero points "
     "and scales", lambda: D.dequant_gemm_uint8(128, 128, 256), lambda: dequant_uint8_inputs(128, 128, 256)),
    ("dequant GEMM 128x128x256, packed uint4 weights, per-group zero points and scales [K // 128, N] "
     "(TileLang example form)", lambda: D.dequant_gemm_int4_grouped(128, 128, 256, "uint", group_size=128),
     lambda: dequant_int4_inputs(128, 128, 256, 128)),
    ("paged-KV decode 2x32 heads x64, 32-row blocks through a block table (int32, read by the reader)",
     lambda: K.paged_decode(2, 32, 64, 32, 4, 16), lambda: paged_decode_inputs(2, 32, 64, 32, 4, 16)),
    ("MoE grouped GEMM 256x128x128 bf16, an expert per 64-row block (int32 table)",
     lambda: K.moe_grouped_gemm(256, 128, 128, 4, 64, 64, 64), lambda: moe_inputs(256, 128, 128, 4, 64)),
    ("convolution 3x3, stride 2, pad 1, 2x17x15x64 -> 64 channels bf16 (TileLang example form, T.im2col)",
     lambda: K.convolution(2, 64, 17, 15, 64, 3, 2, 1, 1), lambda: conv_inputs(2, 64, 17, 15, 64, 3, 2, 1, 1)),
]


def main() -> int:
    torch.manual_seed(0)
    worst = []
    failures = 0
    for arch in ("wormhole_b0", "blackhole"):
        for title, make, inputs in CASES:
            kernel = tilelang.compile(make(), target=f"tt -arch={arch}")
            print(f"== {title} [{arch}]")
            print(plan_summary(kernel.plan, max_rows=4))
            print(f"  sources: {kernel.artifact_dir}")
            for name in sorted(p.relative_to(kernel.artifact_dir) for p in kernel.artifact_dir.rglob("*") if p.is_file()):
                print(f"    {name}")
            args, refs = inputs()
            kernel(*args)
            refs = refs if isinstance(refs, dict) else {len(args) - 1: refs}
            err = max((args[i].float() - ref).abs().max().item() for i, ref in refs.items())
            rel = max((args[i].float() - ref).abs().max().item() / ref.abs().max().item() for i, ref in refs.items())
            total = kernel.report["total"]
            print(f"  ran on tt-sim (CPU emulator) in {kernel.report['wall_seconds']:.2f} s: max |error| vs torch "
                  f"{err:.3g} (relative {rel:.2e}); DRAM read {total['dram_read_bytes']} B, written "
                  f"{total['dram_write_bytes']} B, {total['matmul_tiles']} matmul_tiles, {total['tile_ops']} other tile ops")
            worst.append((rel, title, arch))
            check = check_artifact(kernel.artifact_dir)
            print(f"  real TT-Metalium 0.81 check: {'PASS' if check.ok else 'FAIL ' + str(check.first_error())} "
                  f"({len(check.units)} kernel translation units, {len(check.host.checked)} host APIs, "
                  f"{check.seconds:.1f} s)")
            failures += 0 if check.ok else 1
            print()
    failures += mesh_gemm()
    rel, title, arch = max(worst)
    print(f"largest relative error: {rel:.2e} ({title}, {arch}); real-header check failures: {failures}")
    return 1 if failures else 0


def mesh_gemm() -> int:
    """The design GEMM on an n300 (a 1x2 mesh, target option -mesh=1x2): rows split across the two chips, A and C
    row-sharded, B replicated; the result must equal the one-chip kernel's bit for bit."""
    a, b = torch.randn(256, 128, dtype=torch.bfloat16), torch.randn(128, 128, dtype=torch.bfloat16)
    outs = {}
    for target in ("tt -arch=wormhole_b0", "tt -arch=wormhole_b0 -mesh=1x2"):
        kernel = tilelang.compile(K.design_gemm(256, 128, 128), target=target)
        outs[target] = torch.empty(256, 128, dtype=torch.bfloat16)
        kernel(a, b, outs[target])
    print("== GEMM 256x128x128 bf16 on a 1x2 mesh (n300) [wormhole_b0 -mesh=1x2]")
    mesh = kernel.plan["mesh"]
    for buf in kernel.plan["buffers"]:
        d = buf["distribution"]
        print(f"  {buf['name']}: {d['kind']}" + (f" along dimension {d['dim']}, {d['shard_bytes']} B per chip"
                                                 if d["kind"] == "sharded" else " (every chip)"))
    for chip in kernel.report["chips"]:
        print(f"  chip {chip['chip']}: blocks {mesh['chip_schedule'][0]['blocks'][1]} of b{mesh['axis']}, host->device "
              f"{chip['host_to_device_bytes']} B, DRAM read {chip['total']['dram_read_bytes']} B, "
              f"{chip['total']['matmul_tiles']} matmul_tiles")
    same = torch.equal(*outs.values())
    err = (outs["tt -arch=wormhole_b0"].float() - a.float() @ b.float()).abs().max().item()
    check = check_artifact(kernel.artifact_dir)
    print(f"  equal to one chip bit for bit: {same}; max |error| vs torch {err:.3g}; real TT-Metalium 0.81 check: "
          f"{'PASS' if check.ok else 'FAIL ' + str(check.first_error())}\n")
    return 0 if same and check.ok else 1


if __name__ == "__main__":
    sys.exit(main())
