// tt-sim: compile-time kernel args, as TT-Metalium 0.81's api/compile_time_args.h exposes them.
// The JIT passes them as -DKERNEL_COMPILE_TIME_ARGS=a,b,c; an out-of-range index is a compile error.
#pragma once

#include <array>
#include <cstdint>

#ifndef KERNEL_COMPILE_TIME_ARGS
#define KERNEL_COMPILE_TIME_ARGS
#endif

namespace tt_sim_detail {
template <typename... T>
constexpr std::array<uint32_t, sizeof...(T)> make_compile_time_args(T... values) {
    return {static_cast<uint32_t>(values)...};
}
inline constexpr auto kernel_compile_time_args = make_compile_time_args(KERNEL_COMPILE_TIME_ARGS);
}  // namespace tt_sim_detail

template <uint32_t index>
constexpr uint32_t get_ct_arg() {
    static_assert(index < tt_sim_detail::kernel_compile_time_args.size(), "compile-time arg index out of range");
    return tt_sim_detail::kernel_compile_time_args[index];
}

#define get_compile_time_arg_val(arg_idx) get_ct_arg<arg_idx>()

constexpr uint32_t num_compile_time_args() { return tt_sim_detail::kernel_compile_time_args.size(); }
