"""Boolean masks in T.Parallel: ``and``, ``or``, ``not`` of comparisons (a sliding window's
``q >= k and k > q - W``) become selects of their 0 / 1 tiles; when the nested selects need more DST tiles than
there are, a condition spills as its 0 / 1 tile. Checked exactly against torch on both archs."""

import pytest
import tilelang
import tilelang.language as T
import torch

W = 40


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
def test_sliding_window_mask_with_and_or_not(arch):
    @T.prim_func
    def masked(X: T.Tensor((128, 128), "float32"), Y: T.Tensor((128, 128), "float32")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            s = T.alloc_fragment((64, 64), "float32")
            T.copy(X[by * 64, bx * 64], s)
            for i, j in T.Parallel(64, 64):
                q = by * 64 + i
                k = bx * 64 + j
                s[i, j] = T.if_then_else((q >= k) and (k > q - W) or not (s[i, j] < 3), s[i, j], -1e9)
            T.copy(s, Y[by * 64, bx * 64])

    kernel = tilelang.compile(masked, target={"kind": "tt", "arch": arch})
    x = torch.randn(128, 128) * 2
    y = torch.empty_like(x)
    kernel(x, y)
    q, k = torch.arange(128)[:, None], torch.arange(128)[None, :]
    keep = ((q >= k) & (k > q - W)) | ~(x < 3)
    assert 0.2 < keep.float().mean() < 0.5          # every branch of the mask is taken somewhere
    assert torch.equal(y, torch.where(keep, x, torch.tensor(-1e9)))
