// tt-sim: the kernel API shared by data-movement and compute kernels (runtime args, circular buffers).
#pragma once

#include <cstdint>
#include <cstring>

#include "api/compile_time_args.h"
#include "tt_sim/device_api.hpp"

template <typename T>
inline T get_arg_val(int arg_idx, uint32_t line = __builtin_LINE()) {
    static_assert(sizeof(T) == 4, "get_arg_val<T>: T must be 4 bytes");
    const uint32_t raw = tt_sim::arg(arg_idx, line);
    T value;
    std::memcpy(&value, &raw, sizeof(T));
    return value;
}

template <typename T>
inline T get_common_arg_val(int arg_idx, uint32_t line = __builtin_LINE()) {
    static_assert(sizeof(T) == 4, "get_common_arg_val<T>: T must be 4 bytes");
    const uint32_t raw = tt_sim::common_arg(arg_idx, line);
    T value;
    std::memcpy(&value, &raw, sizeof(T));
    return value;
}

inline void cb_reserve_back(uint32_t cb, uint32_t n, uint32_t line = __builtin_LINE()) {
    tt_sim::cb_reserve_back(cb, n, line);
}
inline void cb_push_back(uint32_t cb, uint32_t n, uint32_t line = __builtin_LINE()) {
    tt_sim::cb_push_back(cb, n, line);
}
inline void cb_wait_front(uint32_t cb, uint32_t n, uint32_t line = __builtin_LINE()) {
    tt_sim::cb_wait_front(cb, n, line);
}
inline void cb_pop_front(uint32_t cb, uint32_t n, uint32_t line = __builtin_LINE()) {
    tt_sim::cb_pop_front(cb, n, line);
}
