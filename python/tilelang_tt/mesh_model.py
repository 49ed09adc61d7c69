"""The performance model of a mesh launch (plan ``mesh``, MeshSplitTT) from its chips' models (perf_model.py).

The kernel takes as long as the slowest chip: the chips run concurrently and never wait for each other. Host
transfers run over the cards' links (device.PerfProfile ``host_link_bytes_per_s``), the chips behind one link
sharing it, the links in parallel: inputs before the kernel, outputs after it.
"""

from __future__ import annotations

from typing import Callable

from .device import TILE_MATMUL_FLOPS, get_perf


def host_bytes(plan: dict) -> list[tuple[int, int]]:
    """(host -> chip, chip -> host) bytes of every chip (row-major over the mesh): a sharded tensor's shard, a
    replicated input whole."""
    to_dev = to_host = 0
    for b in plan["buffers"]:
        d = b.get("distribution", {})
        size = d["shard_bytes"] if d.get("kind") == "sharded" else b["bytes"]
        if b["io"] in ("input", "inout"):
            to_dev += size
        if b["io"] in ("output", "inout"):
            to_host += size
    return [(to_dev, to_host)] * plan["mesh"]["chips"]


def mesh_model(chip_models: list[dict], plan: dict, host: list[tuple[int, int]] | None = None) -> dict:
    """The model of a mesh launch from each chip's model (row-major over the mesh). ``seconds`` is the kernel time
    (the slowest chip's); ``mesh.end_to_end_seconds`` adds the host transfers."""
    perf = get_perf(plan["device"]["arch"])
    host = host or host_bytes(plan)
    slowest = max(range(len(chip_models)), key=lambda k: chip_models[k]["seconds"])
    per_link, bw = perf.chips_per_host_link, perf.host_link_bytes_per_s
    links = range(0, len(host), per_link)
    to_dev_s = max(sum(h[0] for h in host[i:i + per_link]) for i in links) / bw
    to_host_s = max(sum(h[1] for h in host[i:i + per_link]) for i in links) / bw
    cols = plan["mesh"]["shape"][1]
    out = dict(chip_models[slowest])
    seconds = out["seconds"]
    matmuls = sum(m.get("matmul_tiles", 0) for m in chip_models)
    out.update(
        seconds=seconds, tflops=matmuls * TILE_MATMUL_FLOPS / seconds / 1e12 if matmuls and seconds > 0 else None,
        matmul_tiles=matmuls, dram_bytes=sum(m["dram_bytes"] for m in chip_models),
        mesh={"shape": plan["mesh"]["shape"], "slowest_chip": [slowest // cols, slowest % cols],
              "kernel_seconds": seconds, "host_to_device_seconds": to_dev_s, "device_to_host_seconds": to_host_s,
              "end_to_end_seconds": to_dev_s + seconds + to_host_s, "host_link_bytes_per_s": bw,
              "chips_per_host_link": per_link,
              "chips": [{"chip": [k // cols, k % cols], "seconds": m["seconds"], "host_to_device_bytes": h[0],
                         "device_to_host_bytes": h[1]} for k, (m, h) in enumerate(zip(chip_models, host))]})
    return out


def _one_chip(plan: dict) -> dict:
    return {k: v for k, v in plan.items() if k != "mesh"}


def for_artifact(plan: dict, chip_model: Callable[[dict], dict]) -> dict:
    """The compile-time model: every chip runs the same per-chip program, ``chip_model(plan without the mesh)``."""
    chip = chip_model(_one_chip(plan))
    if "error" in chip:
        return chip
    return mesh_model([chip] * plan["mesh"]["chips"], plan)


def for_run(plan: dict, report: dict, chip_model: Callable[[dict, dict], dict]) -> dict:
    """The model of a mesh run: each chip's model from its own cores' counters (tt-sim's report lists every core
    with its chip), ``chip_model(plan without the mesh, the chip's report)``, and the host bytes each chip received
    and sent."""
    models, host = [], []
    for chip in report["chips"]:
        cores = [c for c in report["cores"] if c.get("chip") == chip["chip"]]
        models.append(chip_model(_one_chip(plan), {**report, "cores": cores, "chips": None}))
        host.append((chip["host_to_device_bytes"], chip["device_to_host_bytes"]))
    return mesh_model(models, plan, host)
