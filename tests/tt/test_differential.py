"""Random differential test: 100 seeded cases (shape x block size x dtype x schedule policy x arch; GEMM,
elementwise, row reductions with broadcasts, GEMM epilogues, chained GEMMs; tails included) run on the
emulator and compared with torch; 0 mismatches allowed.
The 1000-case soak run is benchmarks/soak.py."""

import pytest
import tilelang

from examples.random_cases import build, inputs_and_check, make_cases

CASES = make_cases(100, seed=20261122)


@pytest.mark.parametrize("index", range(len(CASES)), ids=[str(c) for c in CASES])
def test_random_case_matches_torch(index, monkeypatch):
    monkeypatch.setenv("TILELANG_TT_POISON_PADDING", "1")   # padding must never leak into results
    case = CASES[index]
    kernel = tilelang.compile(build(case), target={"kind": "tt", "arch": case.arch})
    args, check = inputs_and_check(case, seed=index)
    kernel(*args)
    ok, err, tol = check(args[-1])   # every case's output is its last argument
    assert ok, f"{case}: max error {err} > tolerance {tol}"
