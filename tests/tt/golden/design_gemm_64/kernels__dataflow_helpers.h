// Data-movement helpers of the kernels tilelang-tt generates (templates/dataflow_helpers.h.j2): tile geometry,
// block reads and writes of interleaved tensors, gathers, index reads and the multicast handshake. Shipped with every
// artifact beside reader.cpp and writer.cpp, and compiled with them against the TT-Metalium headers.
#pragma once

#include <cstdint>

#include "api/dataflow/dataflow_api.h"

// Tile geometry (the hardware table, tilelang_tt/device.py): kTileDim x kTileDim tiles stored as kFaceDim x kFaceDim
// faces, faces row-major in the tile and elements row-major in a face.
constexpr uint32_t kTileDim = 32;
constexpr uint32_t kFaceDim = 16;
constexpr uint32_t kFacesPerRow = kTileDim / kFaceDim;
constexpr uint32_t kTileElems = kTileDim * kTileDim;

// Element offset of (row, col) within a tile.
constexpr uint32_t tile_elem_offset(uint32_t row, uint32_t col) {
    return ((row / kFaceDim) * kFacesPerRow + col / kFaceDim) * kFaceDim * kFaceDim + (row % kFaceDim) * kFaceDim +
           col % kFaceDim;
}

// A tensor stored as a grid of tiles (row-major tile order); the last tile row / column may be partly outside the
// tensor (last_rows / last_cols valid elements).
struct TileGrid {
    uint32_t tiles_h;
    uint32_t tiles_w;
    uint32_t last_rows;
    uint32_t last_cols;
};

// The part of one tile a block transfer moves: rows [r_lo, r_hi) x columns [c_lo, c_hi), the window of a block
// smaller than a tile ([r_off, r_off + nrows) x [c_off, c_off + ncols)) clipped to the tensor's last row / column.
struct TilePart {
    uint32_t r_lo;
    uint32_t r_hi;
    uint32_t c_lo;
    uint32_t c_hi;
    bool whole() const { return r_lo == 0 && c_lo == 0 && r_hi == kTileDim && c_hi == kTileDim; }
};

inline TilePart tile_part(const TileGrid& grid, uint32_t tile_row, uint32_t tile_col, uint32_t r_off, uint32_t nrows,
                          uint32_t c_off, uint32_t ncols) {
    const uint32_t valid_rows = tile_row + 1 == grid.tiles_h ? grid.last_rows : kTileDim;
    const uint32_t valid_cols = tile_col + 1 == grid.tiles_w ? grid.last_cols : kTileDim;
    return TilePart{r_off, r_off + nrows < valid_rows ? r_off + nrows : valid_rows, c_off,
                    c_off + ncols < valid_cols ? c_off + ncols : valid_cols};
}

// Calls fn(offset, bytes) for each face-row segment of a tile part: the elements of a face row are contiguous and
// sit at the same byte offset in the DRAM page and in L1, so source and destination stay congruent modulo any NoC
// alignment (the reader reads these segments of an edge tile, the writer writes them).
template <typename Fn>
inline void for_each_face_row_segment(const TilePart& part, uint32_t elem_bytes, Fn fn) {
    for (uint32_t r = part.r_lo; r < part.r_hi; ++r) {
        for (uint32_t face_col = 0; face_col < kFacesPerRow; ++face_col) {
            const uint32_t face_lo = face_col * kFaceDim;
            const uint32_t lo = part.c_lo > face_lo ? part.c_lo : face_lo;
            const uint32_t hi = part.c_hi < face_lo + kFaceDim ? part.c_hi : face_lo + kFaceDim;
            if (lo < hi) {
                fn(tile_elem_offset(r, lo) * elem_bytes, (hi - lo) * elem_bytes);
            }
        }
    }
}

// Indices from tensors (block tables, offsets): reads the kFaceDim-element face row of an int32 tensor that holds
// element (row, col) into the start of the reserved page of index CB `cb` (the face row starts at a multiple of 64
// bytes of its page, so source and destination stay aligned); after noc_async_read_barrier, index_value(cb, col) is
// the element.
template <typename Accessor>
inline void read_index(uint32_t cb, const Accessor& tensor, const TileGrid& grid, uint32_t row, uint32_t col) {
    const uint32_t page = (row / kTileDim) * grid.tiles_w + col / kTileDim;
    const uint32_t face_row = tile_elem_offset(row % kTileDim, col % kTileDim) - col % kFaceDim;
    noc_async_read(get_noc_addr(page, tensor, face_row * sizeof(uint32_t)), get_write_ptr(cb),
                   kFaceDim * sizeof(uint32_t));
}

// Row gathers: row dst_row of the block at the back of `cb` (cols tiles wide) becomes row src_row of an interleaved
// tensor, tile columns [col0, col0 + cols): per tile, its two face-row segments. A segment whose place in its tile
// page and place in the block are congruent modulo the DRAM alignment is read straight into the block (a bfloat16
// segment on Wormhole, whose 32-byte segments all are; a float32 one everywhere); any other is read as the
// kGatherChunk-byte aligned chunk holding it into `scratch`, then moved within L1 to its place (L1 alignment).
// valid == 0 zero-fills the row (from MEM_ZEROS_BASE, through the scratch). A call that left the scratch unused
// writes it from the zeros (64 bytes in L1), as the reader pushes its page with the block.
constexpr uint32_t kGatherChunk = 64;
constexpr uint32_t kDramAlignment = 32;

template <typename Accessor>
inline void gather_row(uint32_t cb, uint32_t dst_row, const Accessor& tensor, const TileGrid& grid, uint32_t src_row,
                       uint32_t col0, uint32_t cols, uint32_t scratch_cb, uint32_t valid) {
    const uint32_t tile_bytes = get_tile_size(cb);
    const uint32_t seg_bytes = kFaceDim * (tile_bytes / kTileElems);
    const uint32_t block = get_write_ptr(cb) + (dst_row / kTileDim) * cols * tile_bytes;
    const uint32_t scratch = get_write_ptr(scratch_cb);
    bool scratch_written = false;
    for (uint32_t c = 0; c < cols; ++c) {
        for (uint32_t face_col = 0; face_col < kFacesPerRow; ++face_col) {
            const uint32_t dst = block + c * tile_bytes +
                                 tile_elem_offset(dst_row % kTileDim, face_col * kFaceDim) * (tile_bytes / kTileElems);
            const uint32_t page = (src_row / kTileDim) * grid.tiles_w + col0 + c;
            const uint32_t src = tile_elem_offset(src_row % kTileDim, face_col * kFaceDim) * (tile_bytes / kTileElems);
            if (valid != 0 && src % kDramAlignment == dst % kDramAlignment) {
                noc_async_read(get_noc_addr(page, tensor, src), dst, seg_bytes);
                continue;
            }
            if (valid == 0) {   // zeros, through the scratch too: its page is written before it is pushed
                noc_async_read(get_noc_addr(MEM_ZEROS_BASE), scratch, kGatherChunk);
            } else {
                noc_async_read(get_noc_addr(page, tensor, src - src % kGatherChunk), scratch, kGatherChunk);
            }
            noc_async_read_barrier();
            const uint32_t at = valid == 0 ? 0 : src % kGatherChunk;
            noc_async_read(get_noc_addr(scratch + at), dst, seg_bytes);
            noc_async_read_barrier();   // the next segment reuses the scratch
            scratch_written = true;
        }
    }
    if (!scratch_written) {     // the reader pushes the scratch's page with the block: never one nothing wrote
        noc_async_read(get_noc_addr(MEM_ZEROS_BASE), scratch, kGatherChunk);
    }
    noc_async_read_barrier();   // the segments read straight into the block
}

// Row scatters: row src_row of the block at the front of `cb` (cols tiles wide) written to row dst_row of an
// interleaved tensor, tile columns [col0, col0 + cols): per tile, its two face-row segments, each written where it
// lives in the destination tile (both addresses are multiples of the segment size, so source and destination stay
// congruent modulo the L1 alignment DRAM writes need); valid == 0 writes nothing.
template <typename Accessor>
inline void scatter_row(uint32_t cb, uint32_t src_row, const Accessor& tensor, const TileGrid& grid, uint32_t dst_row,
                        uint32_t col0, uint32_t cols, uint32_t valid) {
    if (valid == 0) {
        return;
    }
    const uint32_t tile_bytes = get_tile_size(cb);
    const uint32_t elem_bytes = tile_bytes / kTileElems;
    const uint32_t seg_bytes = kFaceDim * elem_bytes;
    const uint32_t block = get_read_ptr(cb) + (src_row / kTileDim) * cols * tile_bytes;
    for (uint32_t c = 0; c < cols; ++c) {
        const uint32_t page = (dst_row / kTileDim) * grid.tiles_w + col0 + c;
        for (uint32_t face_col = 0; face_col < kFacesPerRow; ++face_col) {
            const uint32_t src = block + c * tile_bytes + tile_elem_offset(src_row % kTileDim, face_col * kFaceDim) * elem_bytes;
            const uint32_t dst = tile_elem_offset(dst_row % kTileDim, face_col * kFaceDim) * elem_bytes;
            noc_async_write(src, get_noc_addr(page, tensor, dst), seg_bytes);
        }
    }
}

// A 16-bit element (bfloat16 / float16) used as a scalar: the kHalfChunk bytes of its tile page holding element
// (row, col) -- face rows 2k and 2k + 1 -- into the start of the reserved page of `cb` (source and destination
// aligned to the DRAM alignment of either arch); compute reads element (row % 2) * kFaceDim + col % kFaceDim of it.
constexpr uint32_t kHalfChunk = 64;

template <typename Accessor>
inline void read_half(uint32_t cb, const Accessor& tensor, const TileGrid& grid, uint32_t row, uint32_t col) {
    const uint32_t page = (row / kTileDim) * grid.tiles_w + col / kTileDim;
    const uint32_t offset = tile_elem_offset(row % kTileDim, col % kTileDim) * sizeof(uint16_t);
    noc_async_read(get_noc_addr(page, tensor, offset - offset % kHalfChunk), get_write_ptr(cb), kHalfChunk);
}

inline uint32_t index_value(uint32_t cb, uint32_t col) {
    const uint32_t addr = get_write_ptr(cb) + (col % kFaceDim) * sizeof(uint32_t);
#ifdef TT_SIM_LINE   // tt-sim: L1 is the emulator's memory, loaded through its checks
    return tt_sim::l1_read_u32(addr, __LINE__);
#else
    return *reinterpret_cast<volatile tt_l1_ptr uint32_t*>(addr);
#endif
}
// Calls fn(page, part) for each tile of a rows x cols block at tile (row0, col0) of a tensor, in the row-major order
// the block's tiles sit in a CB: page is the tile's page, or kNoPage for a tile outside the tensor, and part the
// window [r_off, r_off + nrows) x [c_off, c_off + ncols) of it clipped to the tensor (read_tiles and write_tiles).
constexpr uint32_t kNoPage = 0xFFFFFFFFu;

template <typename Fn>
inline void for_each_block_tile(const TileGrid& grid, uint32_t row0, uint32_t col0, uint32_t rows, uint32_t cols,
                                uint32_t r_off, uint32_t nrows, uint32_t c_off, uint32_t ncols, Fn fn) {
    for (uint32_t r = 0; r < rows; ++r) {
        for (uint32_t c = 0; c < cols; ++c) {
            const uint32_t tile_row = row0 + r;
            const uint32_t tile_col = col0 + c;
            if (tile_row < grid.tiles_h && tile_col < grid.tiles_w) {
                fn(tile_row * grid.tiles_w + tile_col, tile_part(grid, tile_row, tile_col, r_off, nrows, c_off, ncols));
            } else {
                fn(kNoPage, TilePart{0, 0, 0, 0});
            }
        }
    }
}

// Zero the tile at l1_addr with NoC reads from the core's zero region, MEM_ZEROS_SIZE bytes at a time (source and
// destination stay aligned, as the NoC requires).
inline void zero_tile(uint32_t l1_addr, uint32_t tile_bytes) {
    const uint64_t zeros = get_noc_addr(MEM_ZEROS_BASE);
    for (uint32_t done = 0; done < tile_bytes; done += MEM_ZEROS_SIZE) {
        const uint32_t n = tile_bytes - done < MEM_ZEROS_SIZE ? tile_bytes - done : MEM_ZEROS_SIZE;
        noc_async_read(zeros, l1_addr + done, n);
    }
}

// A tile of which only a part is wanted (an edge tile, or a block smaller than a tile): the tile is zeroed first;
// after the barrier (NoC reads into overlapping L1 are not ordered) only the part's face-row segments are read.
template <typename Accessor>
inline void read_tile_part(const Accessor& tensor, uint32_t page, const TilePart& part, uint32_t l1_addr,
                           uint32_t tile_bytes, uint32_t elem_bytes) {
    zero_tile(l1_addr, tile_bytes);
    noc_async_read_barrier();
    for_each_face_row_segment(part, elem_bytes, [&](uint32_t offset, uint32_t bytes) {
        noc_async_read(get_noc_addr(page, tensor, offset), l1_addr + offset, bytes);
    });
}

// Issues the NoC reads of a rows x cols block of tiles starting at tile (row0, col0) of an interleaved tensor
// into the reserved back of circular buffer `cb`. A block smaller than a tile is the window [r_off, r_off + nrows)
// x [c_off, c_off + ncols) of its tile. Tiles outside the tensor, and the parts of a tile outside the tensor or
// the window, are zero-filled. The caller reserves the pages, waits on the read barrier and pushes them.
template <typename Accessor>
inline void read_block_tiles(uint32_t cb, const Accessor& tensor, const TileGrid& grid, uint32_t row0, uint32_t col0,
                             uint32_t rows, uint32_t cols, uint32_t r_off, uint32_t nrows, uint32_t c_off,
                             uint32_t ncols, bool transposed) {
    const uint32_t tile_bytes = get_tile_size(cb);
    const uint32_t elem_bytes = tile_bytes / kTileElems;
    const uint32_t base = get_write_ptr(cb);
    uint32_t index = 0;     // the tile's place in the block, row-major
    for_each_block_tile(grid, row0, col0, rows, cols, r_off, nrows, c_off, ncols,
                        [&](uint32_t page, const TilePart& part) {
        const uint32_t position = transposed ? (index % cols) * rows + index / cols : index;
        const uint32_t l1_write_addr = base + position * tile_bytes;
        ++index;
        if (page == kNoPage) {
            zero_tile(l1_write_addr, tile_bytes);
        } else if (part.whole()) {
            noc_async_read_page(page, tensor, l1_write_addr);
        } else {
            read_tile_part(tensor, page, part, l1_write_addr, tile_bytes, elem_bytes);
        }
    });
}

template <typename Accessor>
inline void read_tiles(uint32_t cb, const Accessor& tensor, const TileGrid& grid, uint32_t row0, uint32_t col0,
                       uint32_t rows, uint32_t cols, uint32_t r_off = 0, uint32_t nrows = kTileDim,
                       uint32_t c_off = 0, uint32_t ncols = kTileDim) {
    read_block_tiles(cb, tensor, grid, row0, col0, rows, cols, r_off, nrows, c_off, ncols, false);
}

// A block of whole tiles in transposed tile order: tile (r, c) of the window at position c * rows + r of the block,
// each tile as it is. T.gemm(transpose_B=True)'s B: matmul_block finds the tiles of one K step adjacent and its
// transpose flag transposes within each tile (tt-metal's SDPA reader reads K so).
template <typename Accessor>
inline void read_tiles_transposed(uint32_t cb, const Accessor& tensor, const TileGrid& grid, uint32_t row0,
                                  uint32_t col0, uint32_t rows, uint32_t cols) {
    read_block_tiles(cb, tensor, grid, row0, col0, rows, cols, 0, kTileDim, 0, kTileDim, true);
}

// Multicast (TTMulticastReuse, tt-metal's matmul_multicore_reuse_mcast): one core of each group reads a block from
// DRAM and multicasts it to the group's other cores, at the same L1 address (every core's CBs sit at the same
// addresses and advance in step). Two semaphores per group: the sender's counts the receivers that have reserved
// the block's pages, each receiver's turns VALID once the block has landed. The handshake itself is in the reader,
// one call per step (TTMulticastReuse, the mcast_* operations of intrinsics.py, checked by VerifyTTProgram).
constexpr uint32_t kSemInvalid = 0;
constexpr uint32_t kSemValid = 1;

struct McastGroup {
    uint32_t sender_x;           // NoC coordinates of the core that reads from DRAM
    uint32_t sender_y;
    uint32_t first_x;            // the group's rectangle: low corner ...
    uint32_t first_y;
    uint32_t last_x;             // ... and high corner (NoC coordinates)
    uint32_t last_y;
    uint32_t num_dests;          // cores that receive (the sender excluded)
    bool is_sender;
    uint32_t sender_sem_addr;    // L1 address of the sender semaphore (every core has it at the same address)
    uint32_t receiver_sem_addr;  // L1 address of the receiver semaphore
};

inline volatile tt_l1_ptr uint32_t* semaphore_ptr(uint32_t l1_addr) {
    return reinterpret_cast<volatile tt_l1_ptr uint32_t*>(static_cast<uintptr_t>(l1_addr));
}

inline McastGroup make_mcast_group(uint32_t sender_x, uint32_t sender_y, uint32_t first_x, uint32_t first_y,
                                   uint32_t last_x, uint32_t last_y, uint32_t num_dests, uint32_t is_sender,
                                   uint32_t sender_sem, uint32_t receiver_sem) {
    return McastGroup{sender_x, sender_y, first_x, first_y, last_x, last_y, num_dests, is_sender != 0,
                      static_cast<uint32_t>(get_semaphore(sender_sem)),
                      static_cast<uint32_t>(get_semaphore(receiver_sem))};
}

// The group's cores at L1 `l1_addr`: NOC0 walks the rectangle from its low corner, NOC1 from its high corner
// (the other order is a wrap-around multicast on the torus).
inline uint64_t mcast_addr(const McastGroup& group, uint32_t l1_addr) {
    return noc_index == 0 ? get_noc_multicast_addr(group.first_x, group.first_y, group.last_x, group.last_y, l1_addr)
                          : get_noc_multicast_addr(group.last_x, group.last_y, group.first_x, group.first_y, l1_addr);
}

// The reduce scaler tile: zero, then 1.0 (bf16 0x3F80) in row 0 of every face, written with inline NoC writes to
// this core's own L1 after the zero-fill has landed (tt-metal's reduce scalers have this layout).
inline void generate_reduce_scaler(uint32_t cb) {
    const uint32_t l1_addr = get_write_ptr(cb);
    zero_tile(l1_addr, get_tile_size(cb));
    noc_async_read_barrier();
    constexpr uint32_t kTwoOnes = 0x3F803F80u;   // two bf16 1.0 datums
    constexpr uint32_t kBf16Bytes = 2;
    for (uint32_t face_row = 0; face_row < kFacesPerRow; ++face_row) {
        for (uint32_t face_col = 0; face_col < kFacesPerRow; ++face_col) {
            const uint32_t row0 = l1_addr + tile_elem_offset(face_row * kFaceDim, face_col * kFaceDim) * kBf16Bytes;
            for (uint32_t pair = 0; pair < kFaceDim / 2; ++pair) {
                noc_inline_dw_write(get_noc_addr(row0 + pair * 2 * kBf16Bytes), kTwoOnes);
            }
        }
    }
    noc_async_write_barrier();
}

// A float32 tile holding each element's row (axis 0) or column (axis 1) index within the tile, for element-wise
// code that uses its loop variables as values (e.g. a causal mask); written with inline NoC writes, once.
inline void generate_index_tile(uint32_t cb, uint32_t axis) {
    const uint32_t l1_addr = get_write_ptr(cb);
    for (uint32_t r = 0; r < kTileDim; ++r) {
        for (uint32_t c = 0; c < kTileDim; ++c) {
            const float value = static_cast<float>(axis == 0 ? r : c);
            uint32_t bits;
            __builtin_memcpy(&bits, &value, sizeof(bits));
            const uint32_t offset = tile_elem_offset(r, c) * sizeof(bits);
            noc_inline_dw_write(get_noc_addr(l1_addr + offset), bits);
        }
    }
    noc_async_write_barrier();
}
// Issues the NoC writes of a rows x cols block of tiles at the front of circular buffer `cb` to tile
// (row0, col0) of an interleaved tensor. Only elements inside the tensor (and inside the window [r_off, +nrows) x
// [c_off, +ncols) of a block smaller than a tile) are stored: tiles outside it are skipped and partial tiles are
// written face-row segment by segment. The caller waits for the pages, waits on the write barrier and pops them.
template <typename Accessor>
inline void write_tiles(uint32_t cb, const Accessor& tensor, const TileGrid& grid, uint32_t row0, uint32_t col0,
                        uint32_t rows, uint32_t cols, uint32_t r_off = 0, uint32_t nrows = kTileDim,
                        uint32_t c_off = 0, uint32_t ncols = kTileDim) {
    const uint32_t tile_bytes = get_tile_size(cb);
    const uint32_t elem_bytes = tile_bytes / kTileElems;
    uint32_t l1_read_addr = get_read_ptr(cb);
    for_each_block_tile(grid, row0, col0, rows, cols, r_off, nrows, c_off, ncols,
                        [&](uint32_t page, const TilePart& part) {
        if (page != kNoPage && part.whole()) {
            noc_async_write_page(page, tensor, l1_read_addr);
        } else if (page != kNoPage) {
            for_each_face_row_segment(part, elem_bytes, [&](uint32_t offset, uint32_t bytes) {
                noc_async_write_page(page, tensor, l1_read_addr + offset, bytes, offset);
            });
        }
        l1_read_addr += tile_bytes;
    });
}
