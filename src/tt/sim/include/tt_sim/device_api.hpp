// tt-sim: the interface between kernels (compiled at run time into shared objects) and the emulator.
// Kernel-side SDK headers (api/dataflow, api/compute) are thin inline wrappers over these functions; every
// wrapper passes the caller's source line so that diagnostics point at the generated kernel source.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tt_sim {

// ---- runtime args and compile-time args -----------------------------------------------------------
uint32_t arg(int index, uint32_t line);
uint32_t common_arg(int index, uint32_t line);

// ---- circular buffers (both kernel kinds) ----------------------------------------------------------
void cb_reserve_back(uint32_t cb, uint32_t n, uint32_t line);
void cb_push_back(uint32_t cb, uint32_t n, uint32_t line);
void cb_wait_front(uint32_t cb, uint32_t n, uint32_t line);
void cb_pop_front(uint32_t cb, uint32_t n, uint32_t line);
uint32_t cb_write_ptr(uint32_t cb, uint32_t line);
uint32_t cb_read_ptr(uint32_t cb, uint32_t line);
uint32_t cb_tile_size(uint32_t cb, uint32_t line);
uint32_t cb_pages_reservable(uint32_t cb, uint32_t n);
uint32_t cb_pages_available(uint32_t cb, uint32_t n);

// ---- NoC ---------------------------------------------------------------------------------------------
// Tensors are addressed by (base address, is_dram); pages are interleaved round-robin over the banks.
void noc_read_page(uint32_t base, bool is_dram, uint32_t page_size, uint32_t page, uint32_t l1_addr,
                   uint32_t offset, uint32_t line);
void noc_write_page(uint32_t base, bool is_dram, uint32_t page_size, uint32_t page, uint32_t l1_addr, uint32_t size,
                    uint32_t offset, uint32_t line);
uint64_t noc_local_addr(uint32_t l1_addr);
uint64_t noc_page_addr(uint32_t base, bool is_dram, uint32_t page_size, uint32_t page, uint32_t offset);
void noc_read(uint64_t src_noc_addr, uint32_t l1_addr, uint32_t size, uint32_t line);
void noc_write(uint32_t l1_addr, uint64_t dst_noc_addr, uint32_t size, uint32_t line);
void noc_read_barrier(uint32_t line);
void noc_write_barrier(uint32_t line);
void noc_inline_write(uint64_t dst_noc_addr, uint32_t value, uint8_t byte_enable, uint32_t line);
// A data-movement kernel's load of a 32-bit word from its core's L1 (what `*(volatile tt_l1_ptr uint32_t*)addr` is on
// a card): inside CB pages this kernel has reserved or waited for, with no NoC read of this kernel in flight.
uint32_t l1_read_u32(uint32_t l1_addr, uint32_t line);
// Semaphores and multicast (multicast.cpp): L1 addresses of this core's semaphores, NoC addresses of another
// core's L1 and of a multicast rectangle, and the operations on them.
uint32_t semaphore_addr(uint32_t id, uint32_t line);
void semaphore_set(uint32_t l1_addr, uint32_t value, uint32_t line);
void semaphore_wait(uint32_t l1_addr, uint32_t value, bool at_least, uint32_t line);
void semaphore_inc(uint64_t noc_addr, uint32_t incr, uint32_t line);
void semaphore_set_multicast(uint32_t src_l1, uint64_t dst_mcast, uint32_t num_dests, uint32_t line);
void write_multicast(uint32_t src_l1, uint64_t dst_mcast, uint32_t size, uint32_t num_dests, uint32_t line);
uint64_t noc_core_addr(uint32_t x, uint32_t y, uint32_t l1_addr);
uint64_t noc_mcast_addr(uint32_t x_start, uint32_t y_start, uint32_t x_end, uint32_t y_end, uint32_t l1_addr,
                        uint8_t noc);
uint32_t my_core_x();
uint32_t my_core_y();

// ---- compute -----------------------------------------------------------------------------------------
enum class SrcOrder : uint8_t { Regular, Reverse };
void hw_startup(uint32_t icb0, uint32_t icb1, uint32_t ocb, SrcOrder order, uint32_t line);
void reconfig_srca(uint32_t cb, uint32_t line);
void reconfig_srcb(uint32_t cb, uint32_t line);
void reconfig_pack(uint32_t cb, uint32_t line);
void tile_regs_acquire(uint32_t line);
void tile_regs_commit(uint32_t line);
void tile_regs_wait(uint32_t line);
void tile_regs_release(uint32_t line);
void pack_tile(uint32_t dst, uint32_t cb, uint32_t out_index, bool out_of_order, uint32_t line);
// Packer L1 accumulation on (1) / off (0): while on, pack_tile adds DST to the tile in L1 instead of overwriting it.
void pack_reconfig_l1_acc(uint32_t enable, uint32_t line);

// Inits: FPU inits (every kind but Sfpu) end the packer's reduce edge mask, and are refused while a reduce is
// active (reduce_uninit() first); `name` is the API call, for diagnostics.
// Each FPU init checks that the unpacker is already configured for its CBs' formats (the LLK asserts this in
// the init: reconfig_data_format* must come first). UnaryBcast's flag is the BroadcastType.
enum class Init : uint8_t { Copy, Matmul, Binary, Transpose, Bcast, Sfpu, UnaryBcast };
void op_init(Init kind, uint32_t cb_a, uint32_t cb_b, uint32_t flag, const char* name, uint32_t line);
void copy_tile(uint32_t cb, uint32_t tile, uint32_t dst, uint32_t line);
void transpose_tile(uint32_t cb, uint32_t tile, uint32_t dst, uint32_t line);
void matmul_tiles(uint32_t in0, uint32_t in1, uint32_t t0, uint32_t t1, uint32_t dst, uint32_t line);
// matmul_block_init's block shape (the LLK configures its unpack/math loops for it); matmul_block must match it and
// the init's transpose, and runs ct x rt matmul_tiles (DST[dst + r * ct + c] += in0[t0 + r * kt] @ in1[t1 + c]).
void matmul_block_dims(uint32_t ct, uint32_t rt, uint32_t kt, uint32_t line);
void matmul_block(uint32_t in0, uint32_t in1, uint32_t t0, uint32_t t1, uint32_t dst, uint32_t transpose, uint32_t ct,
                  uint32_t rt, uint32_t kt, uint32_t line);

enum class Binary : uint8_t { Add, Sub, Mul, Div, RSub, Max, Min, Lt, Gt, Le, Ge, Eq, Ne, Pow };
void binary_tiles(Binary op, uint32_t cb_a, uint32_t cb_b, uint32_t ta, uint32_t tb, uint32_t dst, uint32_t line);
// SFPU ops take the SDK's VectorMode value (R: faces 0-1, C: faces 0 and 2, RC: all four faces).
void binary_dst(Binary op, uint32_t dst_a, uint32_t dst_b, uint32_t dst_out, uint8_t vector_mode, uint32_t line);
void binary_scalar(Binary op, uint32_t dst, uint32_t param_bits, uint32_t line);

enum class Unary : uint8_t {
    Exp, Log, Sqrt, Rsqrt, Recip, Relu, Gelu, GeluTanh, Negative, Tanh, Sigmoid, Erf, Erfc, Exp2, Abs, Square, Silu,
    Sign, Gtz, Ltz, Gez, Lez, Eqz, Nez
};
void unary(Unary op, uint32_t dst, uint8_t vector_mode, uint32_t line);
// Unary ops with parameters (fp32 bit patterns unless noted): y = f(x, p0, p1).
enum class UnaryParam : uint8_t {
    Power,            // x ** float(p0)
    PowerIterative,   // x ** p0, p0 a non-negative integer
    Max, Min,         // max(x, float(p0)), min(x, float(p0))
    Gt, Lt, Ge, Le, Eq, Ne,   // x op float(p0) ? 1.0 : 0.0
    Clamp,            // min(max(x, float(p0)), float(p1))
    ExpScaled         // exp(x * float(p0))
};
void unary_param(UnaryParam op, uint32_t dst, uint32_t p0, uint32_t p1, uint8_t vector_mode, uint32_t line);
void fill_tile(uint32_t dst, float value, uint32_t line);
void where_tile(uint32_t dst_cond, uint32_t dst_true, uint32_t dst_false, uint32_t dst_out, uint32_t line);
// typecast_tile<in_fmt, out_fmt>(dst) (tt::DataFormat values): UInt8 / Int8 -> Float32 / Float16_b, floats -> UInt8
void typecast_tile(uint8_t in_fmt, uint8_t out_fmt, uint32_t dst, uint32_t line);

// ---- reduce and broadcast (reduce_bcast.cpp) ----------------------------------------------------------
enum class ReducePool : uint8_t { Sum, Avg, Max };
enum class ReduceAxis : uint8_t { Row, Col, Scalar };
void reduce_init(ReducePool pool, ReduceAxis axis, uint32_t icb, uint32_t icb_scaler, uint32_t ocb, uint32_t line);
void reduce_tile(ReducePool pool, ReduceAxis axis, uint32_t icb, uint32_t icb_scaler, uint32_t itile,
                 uint32_t itile_scaler, uint32_t dst, uint32_t line);
void reduce_uninit(uint32_t line);
// The SFPU reduce (compute_kernel_api.h sfpu_reduce / sfpu_reduce_init, ckernel_sfpu_reduce.h): in place on DST in
// fp32. `pool` 0 SUM, 1 AVG, 2 MAX, 3 MIN (PoolType); `fmt` the tt::DataFormat of the data; ROW reduces each row
// of a ct x rt block of DST tiles into column 0 of the first tile of its tile row, COL (one tile) into row 0.
void sfpu_reduce_init(uint8_t pool, uint8_t fmt, uint32_t line);
void sfpu_reduce(uint8_t pool, ReduceAxis axis, uint8_t fmt, uint32_t dst, uint32_t ct, uint32_t rt, uint32_t line);
enum class BcastDim : uint8_t { None, Col, Row, Scalar };   // BroadcastType's values
void bcast_tiles(Binary op, BcastDim dim, uint32_t icb0, uint32_t icb1, uint32_t itile0, uint32_t itile1, uint32_t dst,
                 uint32_t bcast_row_idx, uint32_t line);
void unary_bcast(BcastDim dim, uint32_t icb, uint32_t itile, uint32_t dst, uint32_t line);

}  // namespace tt_sim
