"""A permissive stand-in for SFPI's ``<sfpi.h>`` and ``<lltt.h>``, which the ttnn wheel does not ship.

SFPI is the RISC-V GCC toolchain (with its headers) that compiles the SFPU code inside tt-llk. Every compute
kernel reaches ``sfpi.h`` in its MATH pass, so a syntax check with another compiler needs a stand-in. This
one is generated from how the wheel's own headers *use* sfpi (names, enum members, constants, ``vConst*``
registers), so it follows the tt-llk version; it models SFPI vectors as mutually convertible value types.
It lets tt-llk parse but checks nothing about SFPI usage itself: SFPI code written inside a kernel is not
verified by the real-header check.
"""

from __future__ import annotations

import re
from pathlib import Path

VEC_TYPES = ["vFloat", "vInt", "vUInt", "vSMag", "vMag", "vFloat16a", "vFloat16b", "vUInt16", "vUInt8", "vSMag16",
             "vSMag8", "vLut16ss", "vLut16ii", "vLut8si", "vLut", "vLut4", "vLut16", "vType"]
SCALAR_TYPES = ["sFloat16a", "sFloat16b", "s2vFloat16a", "s2vFloat16b", "s2vFloat16"]
TYPED_FUNCS = ["as", "convert", "reinterpret"]
SPECIAL = {"dst_reg", "l_reg", "vBool", "LRegs", "SFP_DESTREG_STRIDE", "impl_"}
EXTRA_FUNCS = {"abs", "exexp", "exexp_nodebias", "exman8", "exman9", "setexp", "setman", "setsgn", "addexp", "lz",
               "lz_nosgn", "shft", "int32_to_float", "float_to_fp16a", "float_to_fp16b", "float_to_uint8",
               "float_to_int8", "float_to_uint16", "float_to_int16", "vec_min_max", "subvec_shflror1",
               "subvec_transp", "subvec_shflshr1", "lut", "lut2", "lut2_sign", "lut_sign", "copysgn", "exman",
               "approx_recip", "min", "max", "is_nan", "is_inf", "is_finite", "is_pos", "is_neg"}

LLTT = """// Stand-in for SFPI's <lltt.h> (syntax checks only): same API, empty bodies.
#pragma once
#include <cstdint>
namespace lltt {
enum ExecBool : bool { NoExec, Exec };
template <ExecBool E = NoExec>
[[gnu::always_inline]] inline void record(unsigned start, unsigned length) { (void)start; (void)length; }
[[gnu::always_inline]] inline void replay(unsigned start, unsigned length) { (void)start; (void)length; }
[[gnu::always_inline]] constexpr std::uint32_t replay_insn(unsigned start, unsigned length) {
    return (0x04u << 24) | (start << 14) | (length << 4);
}
}  // namespace lltt
"""


def _scan(tt_metal: Path) -> tuple[str, str]:
    text = []
    for sub in ("tt-llk", "hw/ckernels", "hw/inc"):
        for path in sorted((tt_metal / sub).rglob("*")):
            s = str(path)
            if path.suffix in (".h", ".hpp", ".inl") and "/tests" not in s and "quasar" not in s and "/docs" not in s:
                text.append(path.read_text(errors="replace"))
    src = "\n".join(text)
    return src, re.sub(r"//[^\n]*|/\*.*?\*/", "", src, flags=re.S)


def generate(tt_metal: Path, out: Path) -> None:
    """sfpi.h and lltt.h stand-ins in ``out`` for the SFPI names the wheel's headers use."""
    use = _usage(*_scan(tt_metal))
    text = _vector_types(use["builtins"]) + _declarations(use)
    out.mkdir(parents=True, exist_ok=True)
    (out / "sfpi.h").write_text("".join(text))
    (out / "lltt.h").write_text(LLTT)


def _usage(src: str, code: str) -> dict:
    """The SFPI names the headers use: enums and their members, constants, vConsts, declared types, functions,
    builtins and the functions returning pairs."""
    qualified = set(re.findall(r"\bsfpi::([A-Za-z_][A-Za-z0-9_]*)", code))
    enums: dict[str, set] = {}
    for e, m in re.findall(r"\bsfpi::([A-Z][A-Za-z0-9_]*)::([A-Za-z_][A-Za-z0-9_]*)", code):
        enums.setdefault(e, set()).add(m)
    for e in list(enums) + ["LRegs", "RoundMode", "DataLayout", "ExponentMode", "MantissaMode", "LutSign", "ShiftMode"]:
        for m in re.findall(r"\b%s::([A-Za-z_][A-Za-z0-9_]*)" % e, code):
            enums.setdefault(e, set()).add(m)
    enums.setdefault("LRegs", set()).update({f"LReg{i}" for i in range(8)} | {"LRegCount"})
    macros = set(re.findall(r"#\s*define\s+([A-Za-z_][A-Za-z0-9_]*)", src))
    consts = set(re.findall(r"\b(SFP[A-Z0-9]*_(?:MOD[0-9]|IMM[0-9]+|RND|ENCC|CC)[A-Z0-9_]*)\b", code))
    consts |= {c for c in qualified if re.fullmatch(r"SFP[A-Z0-9_]+", c)}
    consts = (consts | {"SFP_DESTREG_STRIDE"}) - macros
    vconsts = set(re.findall(r"\b(vConst[A-Za-z0-9_]*)\b", code)) - macros
    decl_types = set(re.findall(r"\bsfpi::([A-Za-z_][A-Za-z0-9_]*)\s+[A-Za-z_][A-Za-z0-9_]*\s*[;={(]", code))
    decl_types -= set(VEC_TYPES) | set(SCALAR_TYPES) | set(enums) | {"vBool"}
    skip = decl_types | consts | vconsts | set(enums) | set(VEC_TYPES) | set(SCALAR_TYPES) | set(TYPED_FUNCS) | SPECIAL
    funcs = sorted(({q for q in qualified if q not in skip and q[0].islower()} | EXTRA_FUNCS) - set(TYPED_FUNCS))
    # SFPI-GCC builtins the headers call directly (e.g. __builtin_rvtt_sfpmad, __builtin_rvtt_sfpgt on blackhole)
    builtins = sorted(set(re.findall(r"\b(__builtin_rvtt_[a-z0-9_]+)\s*\(", code)) | {"__builtin_rvtt_sfpmad"})
    pair_funcs = set(re.findall(r"auto\s*\[[^]]*\]\s*=\s*(?:sfpi::)?([a-z_][a-z0-9_]*)\s*\(", code))
    return {"enums": enums, "consts": consts, "vconsts": vconsts, "decl_types": decl_types, "funcs": funcs,
            "builtins": builtins, "pair_funcs": pair_funcs}


def _vector_types(builtins: list) -> list:
    """The macros, builtins and the vector / condition templates every stub has."""
    o = ["// Stand-in for SFPI's <sfpi.h>, generated by tilelang_tt.realcheck.sfpi_stub from the sfpi usage in\n"
         "// the ttnn wheel's headers. Syntax checks only: NOT the SFPI API.\n",
         "#pragma once\n#include <cstdint>\n#include <type_traits>\n#include <utility>\n\n",
         "#define sfpi_inline inline __attribute__((always_inline))\n",
         "#define v_if(x) { if (::sfpi::__stub_cond(x)) {\n#define v_elseif(x) } else if (::sfpi::__stub_cond(x)) {\n",
         "#define v_else } else {\n#define v_endif } }\n#define v_block {\n#define v_endblock }\n",
         "#define v_and(x) ((void)::sfpi::__stub_cond(x))\n\n",
         "".join(f'extern "C" unsigned {b}(...) noexcept;\n' for b in builtins) + "\n",
         "namespace sfpi {\nstruct __vcond {\n  constexpr __vcond() = default;\n"
         "  template <class T> constexpr __vcond(const T&) {}\n"
         "  constexpr __vcond operator!() const { return {}; }\n  constexpr explicit operator bool() const { return true; }\n};\n",
         "template <class T> constexpr bool __stub_cond(const T&) { return true; }\n",
         "template <int K> struct __vec {\n  constexpr __vec() = default;\n"
         "  template <class T> constexpr __vec(const T&) {}\n"
         "  template <class A, class B, class... T> constexpr __vec(const A&, const B&, const T&...) {}\n"
         "  constexpr __vec(const __vec&) = default;\n  __vec& operator=(const __vec&) = default;\n"
         "  template <class T> __vec& operator=(const T&) { return *this; }\n"
         "  template <class T> __vec<K> operator[](const T&) const { return {}; }\n"
         "  constexpr unsigned get() const { return 0; }\n"
         "  const __vec& operator++() const { return *this; }\n  __vec operator++(int) const { return {}; }\n"
         "  const __vec& operator--() const { return *this; }\n  __vec operator--(int) const { return {}; }\n"
         "  __vec operator-() const { return {}; }\n  __vec operator+() const { return {}; }\n"
         "  __vec operator~() const { return {}; }\n  __vcond operator!() const { return {}; }\n"]
    o += [f"  template <class T> __vec& operator{op}(const T&) {{ return *this; }}\n"
          for op in ("+=", "-=", "*=", "&=", "|=", "^=", "<<=", ">>=")]
    o += ["  template <auto... M, class... A> __vec mode(const A&...) const { return {}; }\n",
          "  constexpr void in_use() const {}\n};\n",
          "template <class T> struct __is_vec : std::false_type {};\n"
          "template <int K> struct __is_vec<__vec<K>> : std::true_type {};\n"
          "template <> struct __is_vec<__vcond> : std::true_type {};\n",
          "template <class A, class B> using __vres = std::conditional_t<__is_vec<std::decay_t<A>>::value, "
          "std::decay_t<A>, std::decay_t<B>>;\n",
          "template <class A, class B> using __en = std::enable_if_t<__is_vec<std::decay_t<A>>::value || "
          "__is_vec<std::decay_t<B>>::value, int>;\n"]
    o += [f"template <class A, class B, __en<A, B> = 0> constexpr __vres<A, B> operator{op}(const A&, const B&) "
          "{ return {}; }\n" for op in ("+", "-", "*", "&", "|", "^", "<<", ">>")]
    o += [f"template <class A, class B, __en<A, B> = 0> constexpr __vcond operator{op}(const A&, const B&) "
          "{ return {}; }\n" for op in ("<", "<=", ">", ">=", "==", "!=", "&&", "||")]
    return o


def _declarations(use: dict) -> list:
    """The types, enums, constants and functions the headers use, each a do-nothing stand-in."""
    enums, consts, vconsts, decl_types = use["enums"], use["consts"], use["vconsts"], use["decl_types"]
    o = []
    o += [f"using {t} = __vec<{i + 1}>;\n" for i, t in enumerate(VEC_TYPES)]
    o += ["using vBool = __vcond;\nusing __vany = __vec<0>;\n",
          "struct __vconst : __vec<0> {\n  constexpr __vconst() = default;\n"
          "  template <class T> const __vconst& operator=(const T&) const { return *this; }\n};\n"]
    o += [f"struct {t} {{ template <class T> constexpr explicit {t}(const T&) {{}} constexpr unsigned get() const "
          "{ return 0; } };\n" for t in SCALAR_TYPES]
    o += [f"struct {t} {{ constexpr {t}() = default; template <class... A> constexpr {t}(const A&...) {{}} }};\n"
          for t in sorted(decl_types)]
    o += [f"enum class {e} : int {{ {', '.join(sorted(ms))} }};\n" for e, ms in sorted(enums.items())
          if e not in VEC_TYPES and e not in SCALAR_TYPES]
    o += [f"constexpr unsigned {c} = {n + 1}u;\n" for n, c in enumerate(sorted(consts))]
    o += [f"constexpr __vconst {c}{{}};\n" for c in sorted(vconsts)]
    o += ["struct __dst_t {\n  template <class T> __vany operator[](const T&) const { return {}; }\n"
          "  const __dst_t& operator++() const { return *this; }\n  const __dst_t& operator++(int) const { return *this; }\n"
          "  template <class T> const __dst_t& operator+=(const T&) const { return *this; }\n};\n",
          "constexpr __dst_t dst_reg{};\nconstexpr __dst_t l_reg{};\n"]
    o += [f"template <class T, class... A> constexpr T {f}(A&&...) {{ return T{{}}; }}\n" for f in TYPED_FUNCS]
    for f in use["funcs"]:
        ret = "std::pair<__vany, __vany>" if f in use["pair_funcs"] else "__vany"
        o.append(f"template <class... A> constexpr {ret} {f}(A&&...) {{ return {{}}; }}\n")
    o.append("}  // namespace sfpi\n")
    return o
