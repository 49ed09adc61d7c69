"""Convolution as TileLang's example writes it (example_convolution.py: NHWC data, ``T.im2col`` into the A block of
an implicit GEMM): stride 1 and 2, dilation, odd sizes, both archs, against torch in float64.

The bound: bf16 products are exact in fp32 (HiFi4), the sums fp32; the output is rounded to bf16 once (half an ulp:
2^-9 relative) -- |err| <= 2^-8 * max |ref|.
"""

import pytest
import tilelang
import torch
import torch.nn.functional as F

from examples import kernels as K
from tilelang_tt.errors import TTUnsupportedError

CASES = [  # N, C, H, W, F, K, S, D, P, arch
    (2, 64, 9, 7, 64, 3, 1, 1, 1, "wormhole_b0"),
    (2, 64, 17, 15, 64, 3, 2, 1, 1, "blackhole"),
    (1, 32, 11, 13, 64, 3, 1, 2, 2, "wormhole_b0"),     # dilation 2
    (3, 32, 8, 8, 32, 1, 1, 1, 0, "blackhole"),         # 1x1
]


def reference(a, b, S, D, P):
    return F.conv2d(a.double().permute(0, 3, 1, 2), b.double().permute(3, 2, 0, 1), stride=S, padding=P,
                    dilation=D).permute(0, 2, 3, 1)


@pytest.mark.parametrize("N,C,H,W,F_,K_,S,D,P,arch", CASES)
def test_convolution_against_torch(N, C, H, W, F_, K_, S, D, P, arch):
    kernel = tilelang.compile(K.convolution(N, C, H, W, F_, K_, S, D, P),
                              target={"kind": "tt", "arch": arch, "math_fidelity": "HiFi4"})
    torch.manual_seed(N * 100 + C + S)
    a, b = torch.randn(N, H, W, C, dtype=torch.bfloat16), torch.randn(K_, K_, C, F_, dtype=torch.bfloat16)
    ref = reference(a, b, S, D, P)
    out = torch.empty(*ref.shape, dtype=torch.bfloat16)
    kernel(a, b, out)
    assert (out.double() - ref).abs().max().item() <= 2 ** -8 * ref.abs().max().item()
    reader = (kernel.artifact_dir / "kernels" / "reader.cpp").read_text()
    assert "gather_row(cb_data_shared, row, data, data_grid" in reader


def test_im2col_block_must_stay_in_one_tap():
    """A 64-wide column block over 32 channels would span two kernel taps: refused with the sizes that work."""
    with pytest.raises(TTUnsupportedError, match=r"(?s)T.im2col into a 64x64 block from 32 channels.*fix: use a "
                                                 r"block_K that divides C=32"):
        tilelang.compile(K.convolution(1, 32, 8, 8, 64, 3, 1, 1, 1, block_K=64), target="tt")
