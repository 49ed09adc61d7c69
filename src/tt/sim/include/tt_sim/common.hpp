// tt-sim: the kernel API shared by data-movement and compute kernels (runtime args, circular buffers).
#pragma once

#include <cstdint>
#include <cstring>

#include "api/compile_time_args.h"
#include "tt_sim/device_api.hpp"

namespace tt_sim {
// A call site: `line` of the kernel source, or of a header it includes (`file`) coded into the line's high bits
// (sanitizer.cpp decodes it); a call from the kernel source itself also becomes the task's last kernel line.
uint32_t call_site(uint32_t line, const char* file, bool in_kernel_source);

// The caller's source line, a trailing defaulted argument of every API wrapper (for diagnostics). A type of its own,
// not uint32_t: an integer cannot convert to it, so an argument too many does not compile (as with the SDK) and an
// overload with one parameter fewer can never take a caller's last argument as the line.
struct CallLine {
    uint32_t value;
    static CallLine here(uint32_t l = __builtin_LINE(), const char* f = __builtin_FILE()) {
        return CallLine{call_site(l, f, __builtin_strcmp(f, __BASE_FILE__) == 0)};
    }
    constexpr operator uint32_t() const { return value; }
};
}  // namespace tt_sim

#define TT_SIM_LINE tt_sim::CallLine line = tt_sim::CallLine::here()

template <typename T>
inline T get_arg_val(int arg_idx, TT_SIM_LINE) {
    static_assert(sizeof(T) == 4, "get_arg_val<T>: T must be 4 bytes");
    const uint32_t raw = tt_sim::arg(arg_idx, line);
    T value;
    std::memcpy(&value, &raw, sizeof(T));
    return value;
}

template <typename T>
inline T get_common_arg_val(int arg_idx, TT_SIM_LINE) {
    static_assert(sizeof(T) == 4, "get_common_arg_val<T>: T must be 4 bytes");
    const uint32_t raw = tt_sim::common_arg(arg_idx, line);
    T value;
    std::memcpy(&value, &raw, sizeof(T));
    return value;
}

inline void cb_reserve_back(uint32_t cb, uint32_t n, TT_SIM_LINE) {
    tt_sim::cb_reserve_back(cb, n, line);
}
inline void cb_push_back(uint32_t cb, uint32_t n, TT_SIM_LINE) {
    tt_sim::cb_push_back(cb, n, line);
}
inline void cb_wait_front(uint32_t cb, uint32_t n, TT_SIM_LINE) {
    tt_sim::cb_wait_front(cb, n, line);
}
inline void cb_pop_front(uint32_t cb, uint32_t n, TT_SIM_LINE) {
    tt_sim::cb_pop_front(cb, n, line);
}
