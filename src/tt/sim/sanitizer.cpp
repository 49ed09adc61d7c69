// tt-sim: sanitizer: errors that name core, kernel and source line; deadlock reports; end-of-run checks.

#include <cstdarg>
#include <cstdio>
#include <cstdlib>

#include "sim_internal.hpp"

namespace tt_sim {

std::string format(const char* fmt, ...) {
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    return buf;
}

const char* role_name(Role r) {
    switch (r) {
        case Role::Reader: return "reader (RISCV_1)";
        case Role::Writer: return "writer (RISCV_0)";
        default: return "compute";
    }
}

std::string where(const Task& t, uint32_t line) {
    return format("core (x=%u, y=%u) %s kernel %s:%u", t.core->x, t.core->y, role_name(t.role),
                  t.kernel->spec.path.c_str(), line);
}

void die(const std::string& message) {
    std::fprintf(stderr, "tt-sim error: %s\n", message.c_str());
    std::fflush(stderr);
    std::_Exit(3);
}

void kernel_error(uint32_t line, const std::string& message) {
    die(where(cur(), line) + ": " + message);
}

std::string env_or(const char* name, const std::string& fallback) {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

std::string deadlock_report(const std::vector<std::unique_ptr<Task>>& tasks) {
    std::string out = "deadlock: every unfinished kernel is blocked\n";
    for (const auto& t : tasks) {
        if (t->done) continue;
        out += "  " + where(*t, t->blocked_line) + ": blocked in " + t->blocked_on;
        out += "\n";
    }
    out += "  (a cb_wait_front with no matching cb_push_back, or a cb_reserve_back on a full CB that nobody pops)";
    return out;
}

// Every CB must end balanced (what was pushed was popped, nothing is left reserved), every NoC write
// barriered and DST released.
void check_end_of_run(const Device& dev, const std::vector<std::unique_ptr<Task>>& tasks) {
    for (const auto& core : dev.run_cores) {
        for (uint32_t i = 0; i < kMaxCBs; ++i) {
            const CBState& s = core->cbs[i];
            if (!s.configured) continue;
            if (s.received != s.acked || s.reserved != 0) {
                die(format("core (x=%u, y=%u) CB %u ends unbalanced: %u pages pushed, %u popped, %u still reserved",
                           core->x, core->y, i, s.received, s.acked, s.reserved));
            }
        }
    }
    for (const auto& t : tasks) {
        if (noc_has_pending(*t, false)) {
            die(where(*t, 0) + ": kernel ended with NoC reads not completed (missing noc_async_read_barrier)");
        }
        if (noc_has_pending(*t, true)) {
            die(where(*t, 0) + ": kernel ended with NoC writes not completed (missing noc_async_write_barrier)");
        }
        if (t->role == Role::Compute && t->compute.phase != ComputeState::Phase::Idle) {
            die(where(*t, 0) + ": kernel ended with DST still acquired (missing tile_regs_release)");
        }
    }
}

}  // namespace tt_sim
