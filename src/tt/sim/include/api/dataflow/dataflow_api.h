// tt-sim: the TT-Metalium 0.81 data-movement kernel API (api/dataflow/dataflow_api.h), executed by the
// emulator. Signatures match the SDK; a trailing defaulted `line` records the caller's source line.
#pragma once

#include <cstdint>

#include "api/compile_time_args.h"
#include "api/tensor/tensor_accessor.h"
#include "tt_sim/common.hpp"

// The firmware keeps MEM_ZEROS_SIZE zero bytes at MEM_ZEROS_BASE in every core's L1 (dev_mem_map.h); tt-sim's
// kernel JIT defines both for the device's arch from the hardware table (tt_sim/hw_constants.hpp).
#ifndef MEM_ZEROS_BASE
#error "MEM_ZEROS_BASE is defined by the kernel build (tt-sim's JIT or the SDK's dev_mem_map.h)"
#endif

inline uint64_t get_noc_addr(uint32_t addr, uint8_t noc = noc_index) {
    (void)noc;
    return tt_sim::noc_local_addr(addr);
}

inline uint32_t get_write_ptr(uint32_t cb, TT_SIM_LINE) { return tt_sim::cb_write_ptr(cb, line); }
inline uint32_t get_read_ptr(uint32_t cb, TT_SIM_LINE) { return tt_sim::cb_read_ptr(cb, line); }
inline int32_t get_tile_size(int32_t cb, TT_SIM_LINE) {
    return static_cast<int32_t>(tt_sim::cb_tile_size(static_cast<uint32_t>(cb), line));
}
inline bool cb_pages_reservable_at_back(int32_t cb, int32_t n) {
    return tt_sim::cb_pages_reservable(static_cast<uint32_t>(cb), static_cast<uint32_t>(n)) != 0;
}
inline bool cb_pages_available_at_front(int32_t cb, int32_t n) {
    return tt_sim::cb_pages_available(static_cast<uint32_t>(cb), static_cast<uint32_t>(n)) != 0;
}

template <typename AddrGen>
inline void noc_async_read_page(uint32_t id, const AddrGen& addrgen, uint32_t dst_local_l1_addr, uint32_t offset = 0,
                                uint8_t noc = noc_index, TT_SIM_LINE) {
    (void)noc;
    tt_sim::noc_read_page(addrgen.bank_base_address, AddrGen::is_dram, addrgen.page_size, id, dst_local_l1_addr,
                          offset, line);
}

template <typename AddrGen>
inline void noc_async_write_page(uint32_t id, const AddrGen& addrgen, uint32_t src_local_l1_addr, uint32_t size = 0,
                                 uint32_t offset = 0, uint8_t noc = noc_index, TT_SIM_LINE) {
    (void)noc;
    tt_sim::noc_write_page(addrgen.bank_base_address, AddrGen::is_dram, addrgen.page_size, id, src_local_l1_addr,
                           size, offset, line);
}

template <typename AddrGen>
inline uint64_t get_noc_addr(uint32_t id, const AddrGen& addrgen, uint32_t offset = 0, uint8_t noc = noc_index) {
    (void)noc;
    return addrgen.get_noc_addr(id, offset);
}

inline void noc_async_read(uint64_t src_noc_addr, uint32_t dst_local_l1_addr, uint32_t size, uint8_t noc = noc_index,
                           TT_SIM_LINE) {
    (void)noc;
    tt_sim::noc_read(src_noc_addr, dst_local_l1_addr, size, line);
}

inline void noc_async_write(uint32_t src_local_l1_addr, uint64_t dst_noc_addr, uint32_t size, uint8_t noc = noc_index,
                            TT_SIM_LINE) {
    (void)noc;
    tt_sim::noc_write(src_local_l1_addr, dst_noc_addr, size, line);
}

// Where an inline write goes (risc_attribs.h); tt-sim emulates L1 destinations (DEFAULT, L1).
enum class InlineWriteDst : uint8_t { DEFAULT = 0, L1 = 1, REG = 2 };
#ifndef NOC_UNICAST_WRITE_VC
#define NOC_UNICAST_WRITE_VC 1
#endif

// Writes the 4 bytes of `val` (those whose bit in `be` is set) to a 4-byte aligned L1 address of this core
// (get_noc_addr(l1_addr)); asynchronous like noc_async_write: it lands by noc_async_write_barrier() /
// noc_async_writes_flushed().
template <InlineWriteDst dst_type = InlineWriteDst::DEFAULT, bool posted = false, bool flush = true>
inline void noc_inline_dw_write(uint64_t addr, uint32_t val, uint8_t be = 0xF, uint8_t noc = noc_index,
                                uint8_t vc = NOC_UNICAST_WRITE_VC, uint32_t customized_src_addr = 0,
                                TT_SIM_LINE) {
    static_assert(dst_type != InlineWriteDst::REG, "tt-sim: inline writes to stream registers are not emulated");
    static_assert(flush, "tt-sim: noc_inline_dw_write<flush = false> (a caller-provided source slot) is not emulated");
    (void)noc;
    (void)vc;
    (void)customized_src_addr;
    tt_sim::noc_inline_write(addr, val, be, line);
}

inline void noc_async_read_barrier(uint8_t noc = noc_index, TT_SIM_LINE) {
    (void)noc;
    tt_sim::noc_read_barrier(line);
}
inline void noc_async_write_barrier(uint8_t noc = noc_index, TT_SIM_LINE) {
    (void)noc;
    tt_sim::noc_write_barrier(line);
}
inline void noc_async_writes_flushed(uint8_t noc = noc_index, TT_SIM_LINE) {
    (void)noc;
    tt_sim::noc_write_barrier(line);
}
inline void noc_async_full_barrier(uint8_t noc = noc_index, TT_SIM_LINE) {
    (void)noc;
    tt_sim::noc_read_barrier(line);
    tt_sim::noc_write_barrier(line);
}

// ---- semaphores and multicast (tt-sim: multicast.cpp) ----------------------------------------------------------
// tt_l1_ptr marks pointers into L1 (an address attribute of the SDK's RISC-V compiler); tt-sim's "pointers" to L1
// are the L1 addresses themselves, which only these functions dereference.
#ifndef tt_l1_ptr
#define tt_l1_ptr
#endif
#ifndef NOC_MULTICAST_WRITE_VC
#define NOC_MULTICAST_WRITE_VC 4
#endif
#ifndef NOC_MAX_BURST_SIZE
#define NOC_MAX_BURST_SIZE 8192
#endif
enum class ProgrammableCoreType : uint8_t { TENSIX = 0, ACTIVE_ETH = 1, IDLE_ETH = 2 };

template <ProgrammableCoreType type = ProgrammableCoreType::TENSIX>
inline uintptr_t get_semaphore(uint32_t semaphore_id, TT_SIM_LINE) {
    static_assert(type == ProgrammableCoreType::TENSIX, "tt-sim: only Tensix semaphores are emulated");
    return tt_sim::semaphore_addr(semaphore_id, line);
}

inline uint32_t sim_l1_addr(volatile tt_l1_ptr uint32_t* sem_addr) {
    return static_cast<uint32_t>(reinterpret_cast<uintptr_t>(sem_addr));
}

inline void noc_semaphore_set(volatile tt_l1_ptr uint32_t* sem_addr, uint32_t val, TT_SIM_LINE) {
    tt_sim::semaphore_set(sim_l1_addr(sem_addr), val, line);
}
inline void noc_semaphore_wait(volatile tt_l1_ptr uint32_t* sem_addr, uint32_t val, TT_SIM_LINE) {
    tt_sim::semaphore_wait(sim_l1_addr(sem_addr), val, false, line);
}
inline void noc_semaphore_wait_min(volatile tt_l1_ptr uint32_t* sem_addr, uint32_t val, TT_SIM_LINE) {
    tt_sim::semaphore_wait(sim_l1_addr(sem_addr), val, true, line);
}

// The NoC address of L1 `addr` of core (noc_x, noc_y) (coordinates from worker_core_from_logical_core).
inline uint64_t get_noc_addr(uint32_t noc_x, uint32_t noc_y, uint32_t addr, uint8_t noc = noc_index) {
    (void)noc;
    return tt_sim::noc_core_addr(noc_x, noc_y, addr);
}

// The cores [start, end] (inclusive; NOC0 walks from the low corner, NOC1 from the high one) and an L1 address.
inline uint64_t get_noc_multicast_addr(uint32_t noc_x_start, uint32_t noc_y_start, uint32_t noc_x_end,
                                       uint32_t noc_y_end, uint32_t addr, uint8_t noc = noc_index) {
    return tt_sim::noc_mcast_addr(noc_x_start, noc_y_start, noc_x_end, noc_y_end, addr, noc);
}

template <bool posted = false>
inline void noc_semaphore_inc(uint64_t addr, uint32_t incr, uint8_t noc_id = noc_index,
                              uint8_t vc = NOC_UNICAST_WRITE_VC, TT_SIM_LINE) {
    (void)noc_id;
    (void)vc;
    tt_sim::semaphore_inc(addr, incr, line);
}

inline void noc_semaphore_set_multicast(uint32_t src_local_l1_addr, uint64_t dst_noc_addr_multicast,
                                        uint32_t num_dests, bool linked = false, uint8_t noc = noc_index,
                                        uint8_t vc = NOC_MULTICAST_WRITE_VC, TT_SIM_LINE) {
    (void)linked;
    (void)noc;
    (void)vc;
    tt_sim::semaphore_set_multicast(src_local_l1_addr, dst_noc_addr_multicast, num_dests, line);
}

template <uint32_t max_page_size = NOC_MAX_BURST_SIZE + 1>
inline void noc_async_write_multicast(uint32_t src_local_l1_addr, uint64_t dst_noc_addr_multicast, uint32_t size,
                                      uint32_t num_dests, bool linked = false, uint8_t noc = noc_index,
                                      uint8_t vc = NOC_MULTICAST_WRITE_VC, TT_SIM_LINE) {
    (void)linked;
    (void)noc;
    (void)vc;
    tt_sim::write_multicast(src_local_l1_addr, dst_noc_addr_multicast, size, num_dests, line);
}

// Atomics (noc_semaphore_inc) are applied when issued in tt-sim.
inline void noc_async_atomic_barrier(uint8_t noc_idx = noc_index, TT_SIM_LINE) {
    (void)noc_idx;
    (void)line;
}
