"""The hardware description: the ONE table of TT device, data-format and tile-geometry constants.

Everything else reads these numbers from here:

* the compiler (``formats.py`` is a thin API over ``FORMATS``; the passes, ``pipeline.py``, ``codegen.py`` and
  the templates use ``get_device``/``TILE``);
* the emulator: ``scripts/gen_hw_constants.py`` writes ``tt_sim/hw_constants.hpp`` from this table at CMake
  build time (into the build directory; installed with the emulator's headers); the C++ reads every device,
  format and geometry constant from it (``tests/tt/test_hw_table.py`` checks the header equals the table);
* the real-header check (``realcheck/jit_files.py``: data-format enumerators and tile sizes).

This module must stay importable on its own (no package-relative imports at module level): the header
generator loads it by path before the package is importable (``pip install -e .`` in a fresh clone).

Where each constant comes from (the ttnn 0.81.1 wheel, ``ttnn/tt_metal/...``):

==============================  =================================================================================
constant                        source
==============================  =================================================================================
grid                            core_descriptors/{wormhole_b0_80,blackhole_140}_arch.yaml
l1_size                         hw/inc/internal/tt-1xx/<arch>/dev_mem_map.h:33 ``MEM_L1_SIZE``
mem_map_end                     dev_mem_map.h ``MEM_MAP_END`` (evaluated: 0x8960 wormhole, 0xa080 blackhole)
l1_unreserved_base              llrt/hal/tt-1xx/<arch>/*_hal_tensix.cpp ``DEFAULT_UNRESERVED`` =
                                align_up(MEM_MAP_END + 69 KiB kernel-config buffer, max(DRAM, L1 alignment))
mem_zeros_base / size           dev_mem_map.h ``MEM_ZEROS_BASE`` (evaluated) / ``MEM_ZEROS_SIZE``
dram_alignment, l1_alignment    hw/inc/internal/tt-1xx/<arch>/core_config.h:40-43 ``LOG_BASE_2_OF_*_ALIGNMENT``
dram_banks                      soc_descriptors/<arch>.yaml dram_views
num_cbs                         api/tt-metalium/circular_buffer_constants.h / hostdevcommon kernel_structs.h
dst_tiles*                      tt-llk/tt_llk_<arch>/common/inc/ckernel.h ``get_dest_max_tiles``
noc_ids                         NOC_0, NOC_1 (tt_metal/api/tt-metalium/data_types.hpp ``NOC``)
max_runtime_args                tt_metal/impl/kernels/kernel.cpp ``max_runtime_args`` (341 per kernel per core)
data formats                    hw/inc/internal/tt-1xx/wormhole/wormhole_b0_defines/tensix_types.h ``DataFormat``
tile geometry                   32x32 tiles of four 16x16 faces, faces row-major (``constants.hpp`` TILE_HEIGHT..)
==============================  =================================================================================
"""

from __future__ import annotations

from dataclasses import dataclass, replace

KIB = 1024

# ---- tile geometry ------------------------------------------------------------------------------------------
TILE = 32                          # tile edge, elements
FACE = 16                          # face edge, elements
FACES_PER_TILE = (TILE // FACE) ** 2
TILE_ELEMS = TILE * TILE
FACE_ELEMS = FACE * FACE


# ---- data formats -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DataFormat:
    name: str            # tt::DataFormat enumerator
    value: int           # its numeric value (tensix_types.h)
    datum_bits: int      # bits of one element in the datum section of a tile (Bfp4_b: 4, two per byte)
    exponent_bytes: int  # bytes of the shared-exponent section of a tile (block-float formats; 0 otherwise)
    kind: str = "float"  # "float" (IEEE-like), "bfp" (shared exponent per 16 datums), "int"
    mantissa_bits: int = 0   # bfp: magnitude bits of a datum (no hidden bit); value = +-mag/2^(W-1) * 2^(E-127)
    int_dtype: str = ""      # int: the NumPy dtype of one element as the host stores it

    @property
    def element_bytes(self) -> int:
        """Whole bytes of one element's datum (0 for Bfp4_b, which packs two datums per byte)."""
        return self.datum_bits // 8

    @property
    def tile_bytes(self) -> int:
        """Bytes of one 32x32 tile (host ``Tile::get_tile_size``): the datum section plus the exponent section.
        A 32x32 tile has 64 exponents, so tt-metal never pads that section (it pads only below 16)."""
        return TILE_ELEMS * self.datum_bits // 8 + self.exponent_bytes


# Every tile format the backend knows, by tt::DataFormat name: the layout facts the compiler (CB page sizes, plan),
# the runtime (blockfloat.py's codecs), the emulator (hw_constants.hpp) and the real-header check read.
# Bfp8_b / Bfp4_b: one 8-bit exponent per 16 datums (one face row), exponents first (docs/formats.md).
# Int8 in L1 is sign-magnitude (+-127), UInt8 0..255 (ISA Packers/FormatConversion.md "Final L1 output format").
# The device-side InterleavedAddrGenFast strides Int8 pages by 1088 B (MUL_WITH_TILE_SIZE's default case).
TILE_FORMATS: dict[str, DataFormat] = {f.name: f for f in (
    DataFormat("Float32", 0, 32, 0),
    DataFormat("Float16", 1, 16, 0),
    DataFormat("Float16_b", 5, 16, 0),
    DataFormat("Bfp8_b", 6, 8, TILE_ELEMS // FACE, "bfp", mantissa_bits=7),
    DataFormat("Bfp4_b", 7, 4, TILE_ELEMS // FACE, "bfp", mantissa_bits=3),
    DataFormat("Int8", 14, 8, 0, "int", int_dtype="int8"),
    DataFormat("UInt8", 30, 8, 0, "int", int_dtype="uint8"),
    DataFormat("Int32", 8, 32, 0, "int", int_dtype="int32"),
    DataFormat("UInt32", 24, 32, 0, "int", int_dtype="uint32"),
)}

# TileLang dtype -> data format of a tensor or tile buffer of that dtype (docs/usage.md "Data formats").
FORMATS: dict[str, DataFormat] = {
    "float32": TILE_FORMATS["Float32"],
    "float16": TILE_FORMATS["Float16"],
    "bfloat16": TILE_FORMATS["Float16_b"],
    "uint8": TILE_FORMATS["UInt8"],
}

# Integer formats a CB may hold on the compute path (docs/formats.md "Integers"): the unpacker moves a UInt8 tile
# into DST as 32-bit integers (fp32_dest_acc_en required) and ``typecast_tile<UInt8, Float32>`` makes them floats;
# ``typecast_tile<Float32, UInt8>`` and the packer do the reverse (api/compute/eltwise_unary/typecast.h, 0.81.1).
CB_INT_FORMATS: tuple[str, ...] = ("UInt8", "Int32")
# TileLang dtype -> the format its tile buffers compute in when no integer format serves: an int32 fragment (indices,
# argmax / top-k positions) is held as Float32, exact for integers of magnitude below 2^24, which the lowering proves
# for every value stored into it (constants, loop indices, selects and extrema of such values); only the store to an
# int32 tensor converts (typecast_tile<Float32, Int32>, truncation toward zero) into an Int32 CB the writer drains.
TILE_INT_AS_FLOAT: dict[str, str] = {"int32": "Float32", "bool": "Float32"}
INT_AS_FLOAT_LIMIT = 2 ** 24
# TileLang dtype -> the format of an integer tensor the kernel writes (argmax / top-k indices)
INT_OUTPUT_FORMATS: dict[str, str] = {"int32": "Int32"}

# float8 (TileLang's fp8 GEMMs and quantisation kernels): TT has no float8 data format, but every float8_e4m3fn /
# float8_e5m2 value is exact in bfloat16 (4 / 3 significant bits, exponents inside bfloat16's range). So the host
# writes a float8 tensor the kernel reads as Float16_b pages, and the tile buffers the reader fills from it are
# Float16_b: the FPU multiplies every bit of them at any fidelity (LoFi still takes 5 bits of SrcA, 7 of SrcB). A
# float8 tensor the kernel writes gets Float32 pages (the fp32 DST's values, packed exactly), which the host rounds
# to the float8 dtype as torch converts (nearest-even; e4m3fn saturates at +-448), as a GPU's cast rounds. Compute
# never holds a value rounded to float8: a float8 tile buffer compute writes is Float32 and may only be copied on
# to a float8 tensor. TileLang dtype -> the torch dtype of its tensors.
FLOAT8_DTYPES: dict[str, str] = {"float8_e4m3fn": "float8_e4m3fn", "float8_e4m3": "float8_e4m3fn",
                                 "float8_e5m2": "float8_e5m2"}
FLOAT8_READ_FORMAT, FLOAT8_WRITE_FORMAT = "Float16_b", "Float32"


def torch_dtype_name(dtype) -> str:
    """The torch dtype (a ``torch`` attribute name) of a TileLang dtype's tensors."""
    return FLOAT8_DTYPES.get(str(dtype), str(dtype))


# TileLang dtype -> the format of an index tensor (block tables, expert offsets, gather indices): the data-movement
# kernels read its elements from L1 into addresses (a 64-byte face row per element read, docs/usage.md "Indices from
# tensors"); compute never unpacks it. Its pages and the reader's index CBs hold Int32 (4096-byte tiles).
# bool masks and int64 indices (torch's LongTensor) are widened / narrowed to Int32 by the host when it writes the
# tensor (values outside int32 are refused at the call): the kernels see the same 32-bit words.
INDEX_FORMATS: dict[str, str] = {"int32": "Int32", "bool": "Int32", "int64": "Int32"}
# Narrow integer tensors the kernel reads only as index elements (seer attention's int8 block mask, whose elements a
# block-level `if` reads) are widened to Int32 words by the host as bool masks are; any other use keeps the dtype's
# own storage (int8 weights: READ_ONLY_FORMATS).
NARROW_INDEX_DTYPES = ("int8", "uint8", "int16", "uint16")


def index_format(dtype) -> str | None:
    """The format of ``dtype``'s tensors when the data-movement kernels read their elements as indices, or None."""
    key = str(dtype)
    return INDEX_FORMATS.get(key, "Int32" if key in NARROW_INDEX_DTYPES else None)


# TileLang dtype -> the format of a tensor element used as a scalar in compute (``x * Slopes[by]``): the reader reads
# the aligned part of its tile page holding it into a one-page CB of the tensor's format (read_index for 32-bit
# elements, read_half for 16-bit ones), compute reads it from L1 (read_tile_value; a 16-bit one widened to fp32 bits)
# The dtypes of a scalar kernel parameter (alpha: T.float32): each is passed as one 32-bit runtime argument (a float
# as the bits of its float32 value; an integer's value must fit 32 bits, checked at the call)
SCALAR_PARAM_DTYPES = ("float32", "bfloat16", "float16", "int32", "uint32", "int64", "int16", "uint16", "int8",
                       "uint8", "bool")
SCALAR_ELEMENT_FORMATS: dict[str, str] = {"float32": "Float32", "int32": "Int32", "bfloat16": "Float16_b",
                                          "float16": "Float16"}

# TileLang dtype -> the format of a tensor of that dtype that the kernel only reads (weights). TT has no integer
# matmul path for bf16 math; an int8 tensor is stored as Bfp8_b, which holds every integer in [-127, 127] exactly
# (7 magnitude bits under the face row's shared exponent) and unpacks losslessly to BF16; the runtime refuses -128,
# which neither Bfp8_b nor TT's own Int8 (sign-magnitude) format holds.
READ_ONLY_FORMATS: dict[str, str] = {"int8": "Bfp8_b"}
# The integers a block-float-stored int8 tensor may hold (the runtime refuses others; random CLI inputs draw here).
BFP_INT_RANGE: tuple[int, int] = (-127, 127)

# Formats a tensor may be stored in by annotation (T.TTShard(format=...)), per TileLang dtype of the tensor.
BLOCK_FLOAT_STORAGE: dict[str, tuple[str, ...]] = {
    "bfloat16": ("Bfp8_b", "Bfp4_b"),
    "float32": ("Bfp8_b", "Bfp4_b"),
    "float16": (),                 # Bfp*_b shares the _b (8-bit) exponent family, Float16 is _a: not mixed
    "int8": ("Bfp8_b", "Bfp4_b", "Int8"),
}
# An annotated storage name that is not the tile format its pages and CBs are declared with: format="Int8" keeps an
# int8 tensor's two's-complement bytes in UInt8 pages, as typecast.h asks ("declare the circular buffers as UInt8
# instead of Int8, so the raw 2's complement byte is zero-extended"); TT's own Int8 format is sign-magnitude.
STORAGE_TILE_FORMAT: dict[str, str] = {"Int8": "UInt8"}
# The typecast_tile format of an integer tile in a CB_INT_FORMATS CB, by the tile buffer's dtype: typecast_tile<Int8,
# Float32> reads the zero-extended byte as a signed value (calculate_typecast_int8_to_fp32: exact for -128..127); a
# bool tensor's tile holds the 0 / 1 words the host widened it to (INDEX_FORMATS).
TYPECAST_INT_FORMATS: dict[str, str] = {"uint8": "UInt8", "int8": "Int8", "int32": "Int32", "bool": "Int32"}

# Every tt::DataFormat enumerator (tensix_types.h), for the real-header check's descriptors.
DATA_FORMAT_ENUM: dict[str, int] = {
    "Float32": 0, "Float16": 1, "Bfp8": 2, "Bfp4": 3, "Tf32": 4, "Float16_b": 5, "Bfp8_b": 6, "Bfp4_b": 7,
    "Int32": 8, "UInt16": 9, "Int8": 14, "Bfp2_b": 15, "UInt32": 24, "UInt8": 30, "Invalid": 255,
}


# ---- devices ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DeviceProfile:
    arch: str                 # target spelling: "wormhole_b0" | "blackhole"
    board: str
    grid_x: int               # logical compute grid, columns (CoreCoord.x)
    grid_y: int               # logical compute grid, rows (CoreCoord.y)
    l1_bytes: int             # L1 per Tensix core (MEM_L1_SIZE), firmware area included
    l1_unreserved_base: int   # first L1 byte kernels may use (CBs start here); below it: firmware, mailboxes,
    #                           kernel-config buffer
    mem_zeros_base: int       # MEM_ZEROS_BASE: zero bytes the firmware keeps in every core's L1
    mem_zeros_size: int
    dram_banks: int
    num_cbs: int              # circular buffer indices c_0 .. c_{num_cbs-1}
    dst_tiles: int            # DST tiles per acquire, half-sync, 16-bit accumulation
    dst_tiles_fp32: int       # ... with fp32_dest_acc_en
    dram_alignment: int       # DRAM page alignment; NoC DRAM reads need src == dst modulo this
    l1_alignment: int         # L1 alignment; NoC L1 transfers and DRAM writes need src == dst modulo this
    noc_ids: tuple[int, ...] = (0, 1)
    # A multicast sender flushes its data writes (noc_async_writes_flushed) before multicasting the VALID flag:
    # Blackhole issues the two from separate command FIFOs; on Wormhole one NoC and static virtual channel keep
    # them in order (../shared/reference/TT_KERNEL_PATTERNS.md 3.2 step 4; ttnn
    # reader_bmm_tile_layout_in0_sender_padding.cpp:171-172 flushes under ARCH_BLACKHOLE only).
    mcast_flush_before_flag: bool = False
    max_runtime_args: int = 341
    sources: tuple[str, ...] = ()

    @property
    def num_cores(self) -> int:
        return self.grid_x * self.grid_y

    @property
    def l1_usable_bytes(self) -> int:
        """L1 a program's circular buffers can use: what lies above the firmware reserve."""
        return self.l1_bytes - self.l1_unreserved_base

    def dst_capacity(self, fp32_accumulation: bool, full_sync: bool = False) -> int:
        tiles = self.dst_tiles_fp32 if fp32_accumulation else self.dst_tiles
        return tiles * 2 if full_sync else tiles


def _unreserved_base(mem_map_end: int, dram_alignment: int, l1_alignment: int) -> int:
    """The HAL's DEFAULT_UNRESERVED: MEM_MAP_END plus the 69 KiB kernel-config buffer, aligned up."""
    align = max(dram_alignment, l1_alignment)
    return ((mem_map_end + 69 * KIB - 1) | (align - 1)) + 1


DEVICES: dict[str, DeviceProfile] = {
    "wormhole_b0": DeviceProfile(
        arch="wormhole_b0", board="n150", grid_x=8, grid_y=8, l1_bytes=1464 * KIB,
        l1_unreserved_base=_unreserved_base(0x8960, 32, 16), mem_zeros_base=0x3420, mem_zeros_size=512,
        dram_banks=12, num_cbs=32, dst_tiles=8, dst_tiles_fp32=4, dram_alignment=32, l1_alignment=16,
        sources=(
            "grid 8x8: tt_metal/core_descriptors/wormhole_b0_80_arch.yaml (nebula_x1 compute_with_storage_grid)",
            "L1 1464 KiB: tt_metal/hw/inc/internal/tt-1xx/wormhole/dev_mem_map.h:33 MEM_L1_SIZE",
            "unreserved base: MEM_MAP_END 0x8960 + 69 KiB, aligned to 32 (llrt/hal wh_hal_tensix.cpp)",
            "12 DRAM banks: soc_descriptors/wormhole_b0_80_arch.yaml dram_views",
            "32 CBs: api/tt-metalium/circular_buffer_constants.h NUM_CIRCULAR_BUFFERS",
            "DST 8/4 tiles: tt-llk/tt_llk_wormhole_b0/common/inc/ckernel.h get_dest_max_tiles",
            "alignment: hw/inc/internal/tt-1xx/wormhole/core_config.h:40-43",
        ),
    ),
    "blackhole": DeviceProfile(
        arch="blackhole", board="p150", grid_x=11, grid_y=10, l1_bytes=1536 * KIB,
        l1_unreserved_base=_unreserved_base(0xA080, 64, 16), mem_zeros_base=0x34E0, mem_zeros_size=512,
        dram_banks=8, num_cbs=64, dst_tiles=8, dst_tiles_fp32=4, dram_alignment=64, l1_alignment=16,
        mcast_flush_before_flag=True,
        sources=(
            "grid 11x10: tt_metal/core_descriptors/blackhole_140_arch.yaml (2 columns harvested)",
            "L1 1536 KiB: tt_metal/hw/inc/internal/tt-1xx/blackhole/dev_mem_map.h:33 MEM_L1_SIZE",
            "unreserved base: MEM_MAP_END 0xa080 + 69 KiB, aligned to 64 (llrt/hal bh_hal_tensix.cpp)",
            "8 DRAM banks: soc_descriptors/blackhole_140_arch.yaml dram_views",
            "64 CBs: hostdevcommon/api/hostdevcommon/kernel_structs.h NUM_CIRCULAR_BUFFERS",
            "DST 8/4 tiles: tt-llk/tt_llk_blackhole/common/inc/ckernel.h get_dest_max_tiles",
            "alignment: hw/inc/internal/tt-1xx/blackhole/core_config.h:40-43",
        ),
    ),
}

DEFAULT_ARCH = "wormhole_b0"


def get_device(arch: str) -> DeviceProfile:
    try:
        return DEVICES[arch]
    except KeyError:
        from .errors import TTTargetError

        raise TTTargetError(f"unknown arch {arch!r}", construct="target arch",
                            fix=f"use one of {sorted(DEVICES)}") from None


# ---- performance model inputs (perf_model.py) ---------------------------------------------------------------
# Source tags refer to ../shared/reference/PERF_ANCHORS.md ([S] spec, [P] published measurement, [D] derived
# there; S1..S22 are its source list). [F] = fitted by benchmarks/calibration.py (least squares over the log error
# of the modeled against the published time) on the points named; docs/perf_model.md has the table and residuals.
# Nothing else in the package spells these numbers.

# FPU cycles of one 32x32x32 tile matmul (matmul_tiles) by math fidelity: 16 per fidelity phase (one 8x16x16
# MVMUL per cycle, 16 per phase per tile). PERF_ANCHORS sec. 2 [S] S1 (utilization formula), S3, S4.
FPU_CYCLES_PER_TILE_MATMUL = {"LoFi": 16, "HiFi2": 32, "HiFi3": 48, "HiFi4": 64}
FIDELITY_PHASES = {"LoFi": 1, "HiFi2": 2, "HiFi3": 3, "HiFi4": 4}
# MathFidelity's values (tt-llk llk_defs.h of the 0.81 wheel): the host API's enum and the compute kernels' defines
MATH_FIDELITY_ENUM = {"LoFi": 0, "HiFi2": 2, "HiFi3": 3, "HiFi4": 4}
TILE_MATMUL_FLOPS = 2 * TILE ** 3      # one 32x32x32 tile matmul: a multiply and an add per MAC


def matmul_block_unpack_tiles(rt: int, ct: int) -> tuple[int, int]:
    """Tiles of in0 and in1 one matmul_block call (one K tile of an rt x ct output) unpacks: the LLK walks the
    smaller output dimension, unpacking one tile of that operand and every tile of the other for each step (tt-llk
    _llk_unpack_AB_matmul_: reuse_a = ct >= rt, t_dim = min(rt, ct))."""
    return (rt, rt * ct) if ct >= rt else (ct * rt, ct)


# The calibration points: tt-metal's GEMM_FLOPS report [P] S1 (N150 8x8, traced, BF16 HiFi4/HiFi2, BFP8 HiFi2/LoFi,
# BFP4 LoFi, M=K=N 512..16384: 35 points; P150 11x10 and 13x10 best results: 17 points) and the single-core
# subblock report [P] S16 (3 points), each modeled as TTNN's program (ttnn_reference.py). Fit residuals
# (calibration.py): median |err| 2.5%, worst 13.3% over 55 points (one operand-feed rate for all formats: 3.6%, 14.2%).
# Not fitted (the points do not constrain them: no TTNN configuration waits on its NoC): the round trip and the
# multicast handshake, from tt-npe's latency model [S] S15.
_FIT_WH = "[F] S1 N150 8x8 GEMM_FLOPS, 35 points"
_FIT_BH = "[F] S1 P150 11x10 + 13x10 best results (17 points) and S16 single core (3 points)"


@dataclass(frozen=True)
class PerfProfile:
    """Rates of one architecture, for the performance model. Bandwidths in bytes/s, per-core rates in bytes/cycle."""

    arch: str
    clock_hz: float               # AI clock
    dram_peak_bw: float           # GDDR peak
    dram_bw_bank_aware: float     # achieved by readers placed next to their banks (tt-metal's DRAM benchmark)
    dram_bw_interleaved: float    # achieved by arbitrary cores reading interleaved pages (what our readers do)
    noc_bytes_per_cycle: float    # per core, one NoC direction (reader ingress / writer egress)
    # Operand feed: bytes the unpackers move from L1 into SrcA/SrcB per cycle, sustained while the NoC writes the next
    # blocks into the same L1 (spec peak 80 B/cycle [S] S4). This one: every format's rate fitted as one (calibration.py
    # --fit), used for formats no point constrains (Bfp4_b never binds, Float32 is not in them).
    unpack_bytes_per_cycle: float
    # Sustained / ideal FPU rate per math fidelity (matmul_tiles cycles = FPU_CYCLES_PER_TILE_MATMUL / efficiency).
    # HiFi3 is not in the published points: the mean of HiFi2 and HiFi4, not fitted.
    fpu_efficiency_by_fidelity: tuple
    noc_round_trip_cycles: float  # a read barrier (request to last response), a write barrier (to last ack)
    mcast_handshake_cycles: float  # per multicast transfer: receiver-ready semaphore to the sender, VALID flag back
    launch_seconds: float         # per launch: dispatch of a traced program and kernel start/stop on the cores
    host_link_bytes_per_s: float  # one card's host link, per direction (a mesh's host transfers, mesh_model.py)
    chips_per_host_link: int      # chips behind one link (an n300 card holds two Wormhole chips)
    pack_bytes_per_cycle: float = 64.0     # 4 packers x 16 B/cycle [S] S4
    # A pack with L1 accumulation is a near-memory read-modify-write: one 128-bit non-atomic accumulate per packer every
    # 2 cycles instead of one write per cycle (atomic: 5) [S] tt-isa-documentation WormholeB0/TensixTile/L1.md
    pack_l1_acc_cost: float = 2.0
    eltwise_cycles_per_tile: int = 8       # FPU add/sub math per tile (128 elem/cycle); mul: x fidelity phases [S] S3
    sfpu_cycles_per_tile: float = 124.1    # SFPU ops not in SFPU_CYCLES: the identity LOAD/STORE floor [P] S17 #54317
    # Per-format operand-feed rates overriding unpack_bytes_per_cycle: ((format, B/cycle), ...), calibration.py
    # --fit-per-format (the FPU efficiencies and launch come out the same as in the one-rate fit).
    unpack_bytes_per_cycle_by_format: tuple = ()
    sources: tuple[str, ...] = ()

    def fpu_eff(self, fidelity: str) -> float:
        return dict(self.fpu_efficiency_by_fidelity)[fidelity]

    def unpack_rate(self, fmt: str) -> float:
        return dict(self.unpack_bytes_per_cycle_by_format).get(fmt, self.unpack_bytes_per_cycle)

    @property
    def fpu_efficiency(self) -> float:
        """One number for SuperBlockTT's roofline (transform/super_block.py), which weighs candidates of one kernel
        against each other: the HiFi2 efficiency, the default fidelity of bf16 GEMMs."""
        return self.fpu_eff("HiFi2")


def _fidelities(lofi: float, hifi2: float, hifi4: float) -> tuple:
    return (("LoFi", lofi), ("HiFi2", hifi2), ("HiFi3", round((hifi2 + hifi4) / 2, 4)), ("HiFi4", hifi4))


# SFPU cycles per 32x32 tile, math thread, bf16 DEST (PERF_ANCHORS sec. 4, measured on BH p150 [P] S17).
SFPU_CYCLES = {
    "exp_tile": 93.6,            # approx exp (SFPLOADMACRO), #54317
    "tanh_tile": 126.0,          # shipped approx tanh, #54317 / #49926
    "sigmoid_tile": 221.0,       # approx sigmoid, #49926
    "erf_tile": 221.0,           # not measured; costed like approx gelu (#49926), the nearest measured polynomial
    "relu_tile": 47.0,           # costed like optimized abs (#57292): one compare/select per vector
}

# Launch: one number for both archs [F] (the P150 points are all >= 0.3 ms and do not constrain it; the N150
# 512^3 points, ~10 us, do). The report's own host-minus-device gap at 512^3 is 2.6-3.5 us [P] S1.
_LAUNCH_SECONDS = 4.06e-6

PERF: dict[str, PerfProfile] = {
    "wormhole_b0": PerfProfile(
        arch="wormhole_b0", clock_hz=1.0e9, dram_peak_bw=288e9, dram_bw_bank_aware=265e9, dram_bw_interleaved=195e9,
        noc_bytes_per_cycle=28.1, unpack_bytes_per_cycle=46.3,
        unpack_bytes_per_cycle_by_format=(("Float16_b", 46.0), ("Bfp8_b", 46.7)),
        fpu_efficiency_by_fidelity=_fidelities(0.746, 0.764, 0.808),
        noc_round_trip_cycles=270, mcast_handshake_cycles=220, launch_seconds=_LAUNCH_SECONDS,
        host_link_bytes_per_s=31.5e9, chips_per_host_link=2,
        sources=(
            "clock 1 GHz: [S] S7 (PERF_ANCHORS sec. 1)",
            "DRAM 288 GB/s peak [S] S4,S7; 265 GB/s bank-adjacent readers [P] S4,S9; ~195 GB/s arbitrary core-bank "
            "pairing (190 measured on NoC0) [D from P] S4, PERF_ANCHORS sec. 8",
            "NoC per-core inject/eject 28.1 B/cycle: tt-npe wormhole_b0 model [S] S15",
            f"operand feed 46.3 B/cycle (one rate), Float16_b 46.0, Bfp8_b 46.7 (per format); FPU efficiency "
            f"LoFi/HiFi2/HiFi4 0.746/0.764/0.808: {_FIT_WH}; host-timed like the report's TFLOPS (its device-profiler "
            "TRISC1 time is ~10% shorter at >= 2048^3: clock throttling, which the efficiencies absorb)",
            "round trip 270 cycles: tt-npe wormhole_b0.hpp get_read_latency, source and sink in different rows and "
            "columns (a DRAM bank from a worker) [S] S15",
            "multicast handshake 220 cycles: 2 x tt-npe get_write_latency over a 7-hop row span (40 + 10 x 7) [S] S15",
            f"launch {_LAUNCH_SECONDS * 1e6:.1f} us: {_FIT_WH} (the 512^3 and 1024^3 rows)",
            "host link 31.5 GB/s per direction: PCIe 4.0 x16 (n150/n300), 16 GT/s x 16 lanes x 128/130 [D] PERF_ANCHORS "
            "sec. 1 'Host link'; two chips per link (an n300 card; a T3000 is four n300)",
        ),
    ),
    "blackhole": PerfProfile(
        arch="blackhole", clock_hz=1.35e9, dram_peak_bw=512e9, dram_bw_bank_aware=500e9, dram_bw_interleaved=344e9,
        noc_bytes_per_cycle=47.4, unpack_bytes_per_cycle=73.1,
        unpack_bytes_per_cycle_by_format=(("Float16_b", 76.6), ("Bfp8_b", 69.7)),
        fpu_efficiency_by_fidelity=_fidelities(0.892, 0.872, 0.895),
        noc_round_trip_cycles=329, mcast_handshake_cycles=300, launch_seconds=_LAUNCH_SECONDS,
        host_link_bytes_per_s=63.0e9, chips_per_host_link=1,
        sources=(
            "clock 1.35 GHz: [S] S8 (PERF_ANCHORS sec. 1)",
            "DRAM 512 GB/s peak [S] S8,S10; 500 GB/s bank-adjacent [P] S10; 344 GB/s arbitrary reader cores [P] S10",
            "NoC per-reader ceiling 47.4 B/cycle [P] S10",
            f"operand feed 73.1 B/cycle (one rate), Float16_b 76.6, Bfp8_b 69.7 (per format); FPU efficiency "
            f"LoFi/HiFi2/HiFi4 0.892/0.872/0.895: {_FIT_BH}",
            "round trip 329 cycles: tt-npe blackhole.hpp get_read_latency, different row and column [S] S15",
            "multicast handshake 300 cycles: 2 x tt-npe get_write_latency over a 10-hop row span (40 + 11 x 10) "
            "[S] S15",
            f"launch {_LAUNCH_SECONDS * 1e6:.1f} us: shared with wormhole_b0 ({_FIT_WH})",
            "host link 63.0 GB/s per direction: PCIe 5.0 x16 (p100/p150), 32 GT/s x 16 lanes x 128/130 [D] "
            "PERF_ANCHORS sec. 1 'Host link'; one chip per card",
        ),
    ),
}


# Boards of an architecture whose DRAM differs from the profile's: the published point was measured on it, so its
# model scales the DRAM rates by the board's peak (the same achieved fraction), everything else as the profile.
BOARD_DRAM_PEAK = {"p100a": ("blackhole", 448e9, "DRAM 448 GB/s peak, 7 banks [S] S8 (PERF_ANCHORS sec. 1)")}


def board_perf(board: str) -> PerfProfile:
    """The profile of ``board`` (a p100a: a Blackhole with 7 of the p150's 8 DRAM banks)."""
    arch, peak, source = BOARD_DRAM_PEAK[board]
    base = PERF[arch]
    scale = peak / base.dram_peak_bw
    return replace(base, dram_peak_bw=peak, dram_bw_bank_aware=base.dram_bw_bank_aware * scale,
                   dram_bw_interleaved=base.dram_bw_interleaved * scale,
                   sources=base.sources + (f"{board}: {source}; achieved rates scaled by {scale:.3f}",))


def get_perf(arch: str) -> PerfProfile:
    get_device(arch)          # same error for an unknown arch
    return PERF[arch]
