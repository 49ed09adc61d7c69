// tt-sim: host-side TensorAccessorArgs (interleaved: [ArgsConfig bits, aligned page size]).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "tt-metalium/distributed.hpp"

namespace tt::tt_metal {

class TensorAccessorArgs {
public:
    explicit TensorAccessorArgs(const distributed::MeshBuffer& buffer)
        : is_dram_(buffer.is_dram()), page_size_(buffer.page_size()) {}
    explicit TensorAccessorArgs(const std::shared_ptr<distributed::MeshBuffer>& buffer) : TensorAccessorArgs(*buffer) {}
    void append_to(std::vector<uint32_t>& compile_args) const {
        const std::vector<uint32_t> args = get_compile_time_args();
        compile_args.insert(compile_args.end(), args.begin(), args.end());
    }
    std::vector<uint32_t> get_compile_time_args() const {
        constexpr uint32_t kIsDram = 2;   // tensor_accessor::ArgConfig::IsDram
        return {is_dram_ ? kIsDram : 0u, page_size_};
    }

private:
    bool is_dram_;
    uint32_t page_size_;
};

}  // namespace tt::tt_metal
