// tt-sim: sanitizer: errors that name core, kernel and source line; deadlock reports; end-of-run checks.

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

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

namespace {
// Headers kernels call the API from (the artifact's dataflow_helpers.h): a call site's high bits index this list.
constexpr uint32_t kLineBits = 20;
std::vector<std::string>& call_files() {
    static std::vector<std::string> files;
    return files;
}
uint32_t line_number(uint32_t site) { return site & ((1u << kLineBits) - 1); }
uint32_t file_index(uint32_t site) { return site >> kLineBits; }
// The kernel-source line a diagnostic refers to: the call's own, or the kernel's last call before a helper's.
uint32_t kernel_line(const Task& t, uint32_t site) { return file_index(site) == 0 ? site : t.cur_line; }
}  // namespace

uint32_t call_site(uint32_t line, const char* file, bool in_kernel_source) {
    if (in_kernel_source) {
        cur().cur_line = line;
        return line;
    }
    auto& files = call_files();
    size_t i = 0;
    while (i < files.size() && files[i] != file) ++i;
    if (i == files.size()) files.emplace_back(file);
    return line_number(line) | static_cast<uint32_t>(i + 1) << kLineBits;
}

std::string line_text(uint32_t site) {
    if (file_index(site) == 0) return "line " + std::to_string(site);
    const std::string& file = call_files().at(file_index(site) - 1);
    return file.substr(file.find_last_of('/') + 1) + ":" + std::to_string(line_number(site));
}

std::string where(const Task& t, uint32_t site) {
    const std::string helper = file_index(site) == 0 ? "" : " (" + line_text(site) + ")";
    return chip_name(*sim().devices.at(static_cast<size_t>(t.core->device))) +
           format("core (x=%u, y=%u) %s kernel %s:%u%s", t.core->x, t.core->y, role_name(t.role),
                  t.kernel->spec.path.c_str(), kernel_line(t, site), helper.c_str());
}

void die(const std::string& message) {
    std::fprintf(stderr, "tt-sim error: %s\n", message.c_str());
    std::fflush(stderr);
    std::_Exit(3);
}

// The TileLang statement a generated line belongs to: the nearest `// T.` comment at or above it (the
// generator writes one before the code of each TileLang statement), and the kernel's `// Source:` header.
std::string tilelang_context(const std::string& path, uint32_t line) {
    std::ifstream file(path);
    std::string text, statement, source;
    for (uint32_t n = 1; std::getline(file, text) && n <= line; ++n) {
        const size_t start = text.find_first_not_of(' ');
        if (start == std::string::npos) continue;
        if (text.compare(start, 5, "// T.") == 0) statement = text.substr(start + 3);
        if (text.compare(start, 10, "// Source:") == 0) source = text.substr(start + 11);
    }
    if (statement.empty()) return "";
    return "\n  TileLang: " + statement + (source.empty() ? "" : " (" + source + ")");
}

void kernel_error(uint32_t line, const std::string& message) {
    const Task& t = cur();
    die(where(t, line) + ": " + message + tilelang_context(t.kernel->spec.path, kernel_line(t, line)));
}

std::string env_or(const char* name, const std::string& fallback) {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

std::string deadlock_report(const std::vector<Task*>& tasks) {
    std::string out = "deadlock: every unfinished kernel is blocked\n";
    for (const Task* t : tasks) {
        if (t->done) continue;
        out += "  " + where(*t, t->blocked_line) + ": blocked in " + t->blocked_on;
        out += tilelang_context(t->kernel->spec.path, kernel_line(*t, t->blocked_line)) + "\n";
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
                die(chip_name(dev) + format("core (x=%u, y=%u) CB %u ends unbalanced: %u pages pushed, %u popped, %u still reserved",
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
