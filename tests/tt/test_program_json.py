"""tt.program.json: the explicit TT program as data. Read back, it is the same program (it prints the artifact's
tt.program.txt again, character for character); its expressions evaluate per core without C++ text; what it
cannot hold or read is refused by name."""

import json

import pytest
from tvm import tirx

from examples import kernels as K
from tests.tt.helpers import artifact
from tilelang_tt import ttir, ttir_json
from tilelang_tt.perf_model import program_work

KERNELS = {
    "design_gemm": lambda: K.design_gemm(128, 128, 128),
    "example_gemm_multicast": lambda: K.tilelang_example_gemm(512, 512, 512),
    "flash_attention_causal": lambda: K.flash_attention(1, 2, 128, 128, 64, is_causal=True),
    "layernorm": lambda: K.layernorm(64, 256),
    "dynamic_gemm": lambda: K.dynamic_gemm(),
    "paged_decode": lambda: K.paged_decode(2, 32, 64, 32, 4, 16),
    "moe_grouped_gemm": lambda: K.moe_grouped_gemm(256, 128, 128, 4, 64, 64, 64),
}


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_stored_program_prints_the_same_text(name):
    art = artifact(KERNELS[name]())
    program = ttir_json.from_json(json.loads(art.files["tt.program.json"]))
    assert ttir.dump(program) == art.files["tt.program.txt"]
    # and it counts like the program the compiler built (static walk of the stored program)
    if not art.plan["schedule"].get("dynamic"):
        works = program_work(program, art.plan)
        assert sum(w.dram_read_bytes for w in works) > 0


def test_expressions_evaluate_structurally():
    i, n = tirx.Var("i", "int32"), tirx.Var("n", "int32")
    e = tirx.Select(i < n, tirx.FloorDiv(i * 64 + 31, 32), tirx.FloorMod(n, 3)) + tirx.Min(i, 2)
    back = ttir_json._Reader().expr(json.loads(json.dumps(ttir_json.expr_to_json(e))))
    assert ttir_json.evaluate(back, {"i": 5, "n": 7}) == (5 * 64 + 31) // 32 + 2
    assert ttir_json.evaluate(back, {"i": 9, "n": 7}) == 7 % 3 + 2
    assert ttir_json.names(back) == {"i", "n"}
    with pytest.raises(LookupError, match="n"):
        ttir_json.evaluate(back, {"i": 1})


def test_unknown_format_and_nodes_are_refused():
    with pytest.raises(ttir_json.ProgramFormatError, match="format 2; this version reads 1"):
        ttir_json.from_json({"format": 2})
    with pytest.raises(ttir_json.ProgramFormatError, match="unknown expression operator 'pow'"):
        ttir_json._Reader().expr({"op": "pow", "args": [1, 2]})
    with pytest.raises(ttir_json.ProgramFormatError, match=r"unknown program node \['while'\]"):
        ttir_json._Reader().body([{"while": 1}])
