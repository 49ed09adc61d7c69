"""Device profiles: the one table of per-architecture limits, each with its source.

Sources are the ttnn 0.81.1 wheel ([W] path), as collected in the project's TT_METALIUM_API reference.
"""

from dataclasses import dataclass

KIB = 1024


@dataclass(frozen=True)
class DeviceProfile:
    arch: str                 # target spelling: "wormhole_b0" | "blackhole"
    board: str
    grid_x: int               # logical compute grid, columns (CoreCoord.x)
    grid_y: int               # logical compute grid, rows (CoreCoord.y)
    l1_bytes: int             # L1 per Tensix core
    dram_banks: int
    num_cbs: int              # circular buffer indices c_0 .. c_{num_cbs-1}
    dst_tiles: int            # DST tiles per acquire, half-sync, 16-bit accumulation
    dst_tiles_fp32: int       # ... with fp32_dest_acc_en
    dram_alignment: int
    l1_alignment: int
    sources: tuple[str, ...]

    @property
    def num_cores(self) -> int:
        return self.grid_x * self.grid_y

    def dst_capacity(self, fp32_accumulation: bool) -> int:
        return self.dst_tiles_fp32 if fp32_accumulation else self.dst_tiles


DEVICES: dict[str, DeviceProfile] = {
    "wormhole_b0": DeviceProfile(
        arch="wormhole_b0", board="n150", grid_x=8, grid_y=8, l1_bytes=1464 * KIB, dram_banks=12, num_cbs=32,
        dst_tiles=8, dst_tiles_fp32=4, dram_alignment=32, l1_alignment=16,
        sources=(
            "grid 8x8: tt_metal/core_descriptors/wormhole_b0_80_arch.yaml (nebula_x1 compute_with_storage_grid)",
            "L1 1464 KiB: tt_metal/hw/inc/internal/tt-1xx/wormhole/dev_mem_map.h:33 MEM_L1_SIZE",
            "12 DRAM banks: soc_descriptors/wormhole_b0_80_arch.yaml dram_views",
            "32 CBs: api/tt-metalium/circular_buffer_constants.h NUM_CIRCULAR_BUFFERS",
            "DST 8/4 tiles: tt-llk/tt_llk_wormhole_b0/common/inc/ckernel.h get_dest_max_tiles",
            "alignment: hw/inc/internal/tt-1xx/wormhole/core_config.h:40-43",
        ),
    ),
    "blackhole": DeviceProfile(
        arch="blackhole", board="p150", grid_x=11, grid_y=10, l1_bytes=1536 * KIB, dram_banks=8, num_cbs=64,
        dst_tiles=8, dst_tiles_fp32=4, dram_alignment=64, l1_alignment=16,
        sources=(
            "grid 11x10: tt_metal/core_descriptors/blackhole_140_arch.yaml (2 columns harvested)",
            "L1 1536 KiB: tt_metal/hw/inc/internal/tt-1xx/blackhole/dev_mem_map.h:33 MEM_L1_SIZE",
            "8 DRAM banks: soc_descriptors/blackhole_140_arch.yaml dram_views",
            "64 CBs: hostdevcommon/api/hostdevcommon/kernel_structs.h NUM_CIRCULAR_BUFFERS",
            "DST 8/4 tiles: tt-llk/tt_llk_blackhole/common/inc/ckernel.h get_dest_max_tiles",
            "alignment: hw/inc/internal/tt-1xx/blackhole/core_config.h:40-43",
        ),
    ),
}

DEFAULT_ARCH = "wormhole_b0"

TILE = 32          # tile edge, elements


def get_device(arch: str) -> DeviceProfile:
    try:
        return DEVICES[arch]
    except KeyError:
        from .errors import TTTargetError

        raise TTTargetError(f"unknown arch {arch!r}", construct="target arch",
                            fix=f"use one of {sorted(DEVICES)}") from None


# ---- performance model inputs (perf_model.py) ---------------------------------------------------------------
# Source tags refer to /work/shared/reference/PERF_ANCHORS.md ([S] spec, [P] published measurement, [D] derived
# there; S1..S22 are its source list). Nothing else in the package spells these numbers.

# FPU cycles of one 32x32x32 tile matmul (matmul_tiles) by math fidelity: 16 per fidelity phase (one 8x16x16
# MVMUL per cycle, 16 per phase per tile). PERF_ANCHORS sec. 2 [S] S1 (utilization formula), S3, S4.
FPU_CYCLES_PER_TILE_MATMUL = {"LoFi": 16, "HiFi2": 32, "HiFi3": 48, "HiFi4": 64}
FIDELITY_PHASES = {"LoFi": 1, "HiFi2": 2, "HiFi3": 3, "HiFi4": 4}


@dataclass(frozen=True)
class PerfProfile:
    """Rates of one architecture, for the performance model. Bandwidths in bytes/s, per-core rates in bytes/cycle."""

    arch: str
    clock_hz: float               # AI clock
    dram_peak_bw: float           # GDDR peak
    dram_bw_bank_aware: float     # achieved by readers placed next to their banks (tt-metal's DRAM benchmark)
    dram_bw_interleaved: float    # achieved by arbitrary cores reading interleaved pages (what our readers do)
    noc_bytes_per_cycle: float    # per core, one NoC direction (reader ingress / writer egress)
    unpack_bytes_per_cycle: float = 80.0   # both unpackers jointly, 5 x 128 bit/cycle [S] S4 (sec. 2 "L1 feed")
    pack_bytes_per_cycle: float = 64.0     # 4 packers x 16 B/cycle [S] S4
    fpu_efficiency: float = 0.92           # eta0: sustained / ideal FPU rate, fit in sec. 3 and sec. 8 item 1 [D]
    eltwise_cycles_per_tile: int = 8       # FPU add/sub math per tile (128 elem/cycle); mul: x fidelity phases [S] S3
    sfpu_cycles_per_tile: float = 124.1    # SFPU ops not in SFPU_CYCLES: the identity LOAD/STORE floor [P] S17 #54317
    sources: tuple[str, ...] = ()


# SFPU cycles per 32x32 tile, math thread, bf16 DEST (PERF_ANCHORS sec. 4, measured on BH p150 [P] S17).
SFPU_CYCLES = {
    "exp_tile": 93.6,            # approx exp (SFPLOADMACRO), #54317
    "tanh_tile": 126.0,          # shipped approx tanh, #54317 / #49926
    "sigmoid_tile": 221.0,       # approx sigmoid, #49926
    "erf_tile": 221.0,           # not measured; costed like approx gelu (#49926), the nearest measured polynomial
    "relu_tile": 47.0,           # costed like optimized abs (#57292): one compare/select per vector
}

PERF: dict[str, PerfProfile] = {
    "wormhole_b0": PerfProfile(
        arch="wormhole_b0", clock_hz=1.0e9, dram_peak_bw=288e9, dram_bw_bank_aware=265e9, dram_bw_interleaved=195e9,
        noc_bytes_per_cycle=28.1,
        sources=(
            "clock 1 GHz: [S] S7 (PERF_ANCHORS sec. 1)",
            "DRAM 288 GB/s peak [S] S4,S7; 265 GB/s bank-adjacent readers [P] S4,S9; ~195 GB/s arbitrary core-bank "
            "pairing (190 measured on NoC0) [D from P] S4, PERF_ANCHORS sec. 8",
            "NoC per-core inject/eject 28.1 B/cycle: tt-npe wormhole_b0 model [S] S15",
        ),
    ),
    "blackhole": PerfProfile(
        arch="blackhole", clock_hz=1.35e9, dram_peak_bw=512e9, dram_bw_bank_aware=500e9, dram_bw_interleaved=344e9,
        noc_bytes_per_cycle=47.4,
        sources=(
            "clock 1.35 GHz: [S] S8 (PERF_ANCHORS sec. 1)",
            "DRAM 512 GB/s peak [S] S8,S10; 500 GB/s bank-adjacent [P] S10; 344 GB/s arbitrary reader cores [P] S10",
            "NoC per-reader ceiling 47.4 B/cycle [P] S10",
        ),
    ),
}


def get_perf(arch: str) -> PerfProfile:
    get_device(arch)          # same error for an unknown arch
    return PERF[arch]
