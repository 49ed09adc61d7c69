// tt-sim: TensorAccessorArgs / TensorAccessor for interleaved tensors (TT-Metalium 0.81 semantics:
// two compile-time args per tensor, [ArgsConfig bits, aligned page size]).
#pragma once

#include <cstddef>
#include <cstdint>

#include "api/compile_time_args.h"
#include "tt_sim/device_api.hpp"

#ifndef NOC_INDEX
#define NOC_INDEX 0
#endif
constexpr uint8_t noc_index = NOC_INDEX;

namespace tensor_accessor {
constexpr std::size_t UNKNOWN = static_cast<std::size_t>(-1);
}

template <std::size_t CTA_OFFSET, std::size_t CRTA_OFFSET = tensor_accessor::UNKNOWN>
struct TensorAccessorArgs {
    static constexpr uint32_t config = get_compile_time_arg_val(CTA_OFFSET);
    static constexpr bool is_sharded = (config & 1u) != 0;
    static constexpr bool is_dram = (config & 2u) != 0;
    static_assert(!is_sharded, "tt-sim emulates interleaved tensors only");
    static constexpr uint32_t AlignedPageSizeCTAOffset = CTA_OFFSET + 1;
    static constexpr uint32_t page_size = get_compile_time_arg_val(CTA_OFFSET + 1);
    static constexpr uint32_t next_compile_time_args_offset() { return CTA_OFFSET + 2; }
    static constexpr uint32_t num_compile_time_args() { return 2; }
};

template <typename Args>
struct TensorAccessor {
    uint32_t bank_base_address;
    uint32_t page_size;

    TensorAccessor(const Args&, uint32_t bank_base_address_in, uint32_t page_size_in = Args::page_size)
        : bank_base_address(bank_base_address_in), page_size(page_size_in) {}

    uint64_t get_noc_addr(uint32_t page_id, uint32_t offset = 0, uint8_t noc = noc_index) const {
        (void)noc;
        return tt_sim::noc_page_addr(bank_base_address, Args::is_dram, page_size, page_id, offset);
    }
    static constexpr bool is_dram = Args::is_dram;
};
