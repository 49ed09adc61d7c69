"""Random differential test: 100 seeded cases of examples/random_cases.py run on the emulator and checked against
float64 math; 0 mismatches allowed.

Most cases are kernels written the way TileLang's users write them, generated as source text: RMSNorm / softmax /
LayerNorm / online softmax rows loaded from bf16 / fp16 / fp32 tensors straight into fp32 fragments and stored to
tensors of another dtype, float32 reductions checked at float32 bounds, random element-wise expressions over
tensors, vectors and scalars of mixed dtypes, GEMMs with transposes, pipelining and epilogues; with dead values and
let-bound indices. The rest are the template GEMMs, elementwise kernels, epilogues, MLPs, batched and symbolic
GEMMs. Every output element must lie in the interval the module's error model derives for it (see
examples/random_cases.py); a failure prints the element, its bounds and the kernel's source.
The 1000-case soak run is benchmarks/soak.py.
"""

import pytest
import tilelang

from examples.random_cases import make_cases, run_case, source

CASES = make_cases(100, seed=20261122)


@pytest.mark.parametrize("index", range(len(CASES)), ids=[f"{i}-{c.kind}" for i, c in enumerate(CASES)])
def test_random_case_matches_torch(index, monkeypatch):
    monkeypatch.setenv("TILELANG_TT_POISON_PADDING", "1")   # padding must never leak into results
    case = CASES[index]
    ok, err, tol, detail = run_case(case, index, tilelang.compile)
    assert ok, f"{case}: max error {err} (bound {tol}): {detail}\n{source(case) or ''}"
