// tt-sim: kernel JIT: compile each kernel once per configuration, cache the shared object by content hash.

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "sim_internal.hpp"

namespace tt_sim {

#ifndef TT_SIM_INCLUDE_DIR
#define TT_SIM_INCLUDE_DIR ""
#endif
#ifndef TT_SIM_HEADERS_HASH
#define TT_SIM_HEADERS_HASH "dev"
#endif

namespace {

std::string read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) die("cannot read kernel source " + path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

uint64_t fnv1a(const std::string& s, uint64_t h = 1469598103934665603ull) {
    for (unsigned char ch : s) {
        h ^= ch;
        h *= 1099511628211ull;
    }
    return h;
}

// The kernel source followed by every header it includes from its own directory (`#include "name"` that
// resolves beside it, e.g. the artifact's dataflow_helpers.h): the text a build of it depends on.
std::string source_with_local_headers(const std::string& path) {
    std::string text = read_file(path);
    const std::string dir = path.substr(0, path.find_last_of('/') + 1);
    std::istringstream lines(text);
    std::string line, headers;
    while (std::getline(lines, line)) {
        const std::string directive = "#include \"";
        if (line.compare(0, directive.size(), directive) != 0) continue;
        const size_t end = line.find('"', directive.size());
        if (end == std::string::npos) continue;
        const std::string local = dir + line.substr(directive.size(), end - directive.size());
        struct stat st {};
        if (::stat(local.c_str(), &st) == 0) headers += read_file(local);
    }
    return text + headers;
}

std::string cache_dir() {
    const std::string home = env_or("HOME", "/tmp");
    return env_or("TT_SIM_CACHE_DIR", home + "/.cache/tilelang_tt/sim-kernels");
}

void mkdirs(const std::string& path) {
    std::string partial;
    std::stringstream ss(path);
    std::string part;
    if (!path.empty() && path[0] == '/') partial = "/";
    while (std::getline(ss, part, '/')) {
        if (part.empty()) continue;
        partial += part + "/";
        ::mkdir(partial.c_str(), 0755);
    }
}

std::string shell_quote(const std::string& s) {
    std::string out = "'";
    for (char ch : s) {
        if (ch == '\'') out += "'\\''";
        else out += ch;
    }
    return out + "'";
}

struct Build {
    std::string command, so_path, tmp_path, log_path, source_path;
    bool needed = false;
};

Build plan_build(const KernelImage& k, const Device& dev) {
    const std::string include = env_or("TT_SIM_INCLUDE_DIR", TT_SIM_INCLUDE_DIR);
    const std::string cxx = env_or("TT_SIM_CXX", "c++");
    std::string defines = "-DKERNEL_COMPILE_TIME_ARGS=";
    for (size_t i = 0; i < k.spec.compile_args.size(); ++i) {
        defines += (i ? "," : "") + std::to_string(k.spec.compile_args[i]);
    }
    defines = shell_quote(defines);
    defines += " -DNOC_INDEX=" + std::to_string(k.spec.noc);
    defines += " -DMEM_ZEROS_BASE=" + std::to_string(dev.arch.mem_zeros_base) + "u";
    defines += " -DMEM_ZEROS_SIZE=" + std::to_string(dev.arch.mem_zeros_size) + "u";
    if (k.spec.compute && k.spec.fp32_dest_acc_en) defines += " -DTT_SIM_DST_ACCUM_MODE=1";   // DST_ACCUM_MODE
    if (k.spec.compute && k.spec.math_approx_mode) defines += " -DTT_SIM_APPROX=1";            // APPROX
    for (const auto& [name, value] : k.spec.defines) defines += " " + shell_quote("-D" + name + "=" + value);
    const std::string flags = "-std=c++17 -O2 -fPIC -shared -Wall -Werror";
    const std::string source = source_with_local_headers(k.source_path);
    const uint64_t h = fnv1a(source, fnv1a(defines + flags + cxx + TT_SIM_HEADERS_HASH + include));
    char name[64];
    std::snprintf(name, sizeof(name), "%016llx", static_cast<unsigned long long>(h));
    Build b;
    const std::string dir = cache_dir();
    b.so_path = dir + "/" + name + ".so";
    b.source_path = k.source_path;
    struct stat st {};
    if (::stat(b.so_path.c_str(), &st) == 0) return b;
    mkdirs(dir);
    b.needed = true;
    b.tmp_path = b.so_path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(std::rand());
    b.log_path = b.tmp_path + ".log";
    b.command = cxx + " " + flags + " -I" + shell_quote(include) + " " + defines + " -x c++ " +
                shell_quote(k.source_path) + " -o " + shell_quote(b.tmp_path) + " > " + shell_quote(b.log_path) +
                " 2>&1";
    return b;
}

}  // namespace

void load_kernels(Program& program, Device& dev) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<Build> builds;
    for (auto& k : program.kernels) builds.push_back(plan_build(*k, dev));
    std::vector<std::thread> workers;
    std::vector<int> status(builds.size(), 0);
    for (size_t i = 0; i < builds.size(); ++i) {
        if (!builds[i].needed) continue;
        workers.emplace_back([&, i] { status[i] = std::system(builds[i].command.c_str()); });
    }
    for (auto& w : workers) w.join();
    for (size_t i = 0; i < builds.size(); ++i) {
        Build& b = builds[i];
        if (b.needed) {
            if (status[i] != 0) {
                const std::string log = read_file(b.log_path);
                ::unlink(b.log_path.c_str());
                die("kernel " + b.source_path + " does not compile (-Wall -Werror):\n" + log);
            }
            ::unlink(b.log_path.c_str());
            // rename is atomic: a concurrent build of the same kernel leaves one complete file either way
            if (std::rename(b.tmp_path.c_str(), b.so_path.c_str()) != 0) die("cannot store " + b.so_path);
        }
        KernelImage& k = *program.kernels[i];
        k.handle = ::dlopen(b.so_path.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (k.handle == nullptr) die(std::string("cannot load kernel ") + b.so_path + ": " + ::dlerror());
        k.entry = reinterpret_cast<void (*)()>(::dlsym(k.handle, "_Z11kernel_mainv"));
        if (k.entry == nullptr) die("kernel " + k.spec.path + " has no `void kernel_main()`");
    }
    dev.compile_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace tt_sim
