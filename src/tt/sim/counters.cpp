// tt-sim: counters: the run report (JSON) with per-core and total traffic, tile ops and CB high-water marks.

#include <fstream>

#include "sim_internal.hpp"

namespace tt_sim {

void add_counters(Counters& total, const Counters& c) {
    static constexpr uint64_t Counters::*kFields[] = {
        &Counters::dram_read_bytes, &Counters::dram_write_bytes, &Counters::noc_read_bytes, &Counters::noc_write_bytes,
        &Counters::pages_read,      &Counters::pages_written,    &Counters::matmul_tiles,   &Counters::tile_ops,
        &Counters::reduce_tiles,    &Counters::packs,            &Counters::mcast_bytes,    &Counters::mcast_dest_bytes,
        &Counters::semaphore_ops};
    for (const auto field : kFields) total.*field += c.*field;
}

void write_cores(std::ostream& f, const std::vector<const Core*>& cores, const char* indent, Counters& total,
                 bool with_chip, const Device* dev) {
    bool first = true;
    for (const Core* core : cores) {
        const Counters& c = core->counters;
        add_counters(total, c);
        f << (first ? "\n" : ",\n") << indent << "{";
        if (with_chip) f << "\"chip\": [" << dev->mesh_row << ", " << dev->mesh_col << "], ";
        f << "\"core\": [" << core->y << ", " << core->x << "], \"dram_read_bytes\": "
          << c.dram_read_bytes << ", \"dram_write_bytes\": " << c.dram_write_bytes << ", \"noc_read_bytes\": "
          << c.noc_read_bytes << ", \"noc_write_bytes\": " << c.noc_write_bytes << ", \"tiles_read\": " << c.pages_read
          << ", \"tiles_written\": " << c.pages_written << ", \"matmul_tiles\": " << c.matmul_tiles
          << ", \"tile_ops\": " << c.tile_ops << ", \"reduce_tiles\": " << c.reduce_tiles << ", \"packs\": " << c.packs
          << ", \"noc_multicast_bytes\": " << c.mcast_bytes << ", \"noc_multicast_dest_bytes\": " << c.mcast_dest_bytes
          << ", \"semaphore_ops\": " << c.semaphore_ops << ", \"cb_high_water\": {";
        bool first_cb = true;
        for (uint32_t i = 0; i < kMaxCBs; ++i) {
            if (!core->cbs[i].configured) continue;
            f << (first_cb ? "" : ", ") << "\"" << i << "\": " << core->cbs[i].high_water;
            first_cb = false;
        }
        f << "}}";
        first = false;
    }
}

void write_totals(std::ostream& f, const Counters& total) {
    f << "{\"dram_read_bytes\": " << total.dram_read_bytes << ", \"dram_write_bytes\": "
      << total.dram_write_bytes << ", \"noc_read_bytes\": " << total.noc_read_bytes << ", \"noc_write_bytes\": "
      << total.noc_write_bytes << ", \"tiles_read\": " << total.pages_read << ", \"tiles_written\": "
      << total.pages_written << ", \"matmul_tiles\": " << total.matmul_tiles << ", \"tile_ops\": " << total.tile_ops
      << ", \"reduce_tiles\": " << total.reduce_tiles << ", \"packs\": " << total.packs
      << ", \"noc_multicast_bytes\": " << total.mcast_bytes << ", \"noc_multicast_dest_bytes\": "
      << total.mcast_dest_bytes << ", \"semaphore_ops\": " << total.semaphore_ops << "}";
}

void write_report(Device& dev) {
    if (dev.report_path.empty()) return;
    std::ofstream f(dev.report_path);
    Counters total;
    f << "{\n  \"arch\": \"" << dev.arch.name << "\",\n  \"protocol_only\": " << (sim().protocol_only ? "true" : "false")
      << ",\n  \"run_seconds\": " << dev.last_run_seconds << ",\n  \"compile_seconds\": " << dev.compile_seconds
      << ",\n  \"scheduler_switches\": " << dev.scheduler_switches << ",\n  \"cores\": [";
    std::vector<const Core*> cores;
    for (const auto& core : dev.run_cores) cores.push_back(core.get());
    write_cores(f, cores, "    ", total, false, &dev);
    f << "\n  ],\n  \"total\": ";
    write_totals(f, total);
    f << "\n}\n";
}
}  // namespace tt_sim
