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
