"""Calibration of the performance model on TT's published measurements: model, measured and error per point.

Run: .venv/bin/python benchmarks/calibration.py [--fit | --fit-per-format]
Each published point is modeled as the program TTNN ran for it (tilelang_tt/ttnn_reference.py builds it as TT
program nodes; perf_model counts and prices it exactly as it prices our kernels):

* tt-metal's GEMM_FLOPS report [P] S1 (PERF_ANCHORS sec. 3), N150 8x8, traced, M=K=N 512..16384, BF16 HiFi4 and
  HiFi2, BFP8 HiFi2 and LoFi, BFP4 LoFi: 35 points, each with the benchmark's program config (test_benchmark.py:
  per-core block from the grid, in0_block_w_div, num_out_blocks, in0/out L1-sharded or DRAM as the report lists);
* the P150 best results of PERF_ANCHORS sec. 3 (the current 11x10 grid and the pre-v19.5 13x10 one; the report rows
  they come from, with the same benchmark configs): 17 points;
* the single-core subblock report [P] S16 (PERF_ANCHORS sec. 2; BH p150, M=N=16 tiles, K=1 tile, 100 iterations,
  operands in L1, device kernel duration, so without launch): 1x1, 1x8, 2x2 output subblocks, 3 points.

The error of a point is (modeled time - measured time) / measured time. ``--fit`` refits what the points constrain
(per arch: the FPU efficiency of each published fidelity and the operand-feed rate; one launch time) by least
squares over the log error (Nelder-Mead) and prints it with the residuals; device.PERF holds the result, each
constant with these points as its source. ``--fit-per-format`` fits one operand-feed rate per data format instead.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

from tilelang_tt import perf_model as pm  # noqa: E402
from tilelang_tt import ttnn_reference as ref  # noqa: E402
from tilelang_tt.device import PERF  # noqa: E402


@dataclass
class Point:
    label: str
    arch: str
    config: ref.MatmulConfig
    measured_s: float
    device_timed: bool = False      # a device kernel duration (no launch); else the report's host time, traced

    @property
    def measured_tflops(self) -> float:
        return self.config.flops / self.measured_s / 1e12


# GEMM_FLOPS report, N150 8x8, traced (PERF_ANCHORS sec. 3): TFLOPS by (dtype, fidelity) for M=K=N in WH_SIZES
WH_SIZES = (512, 1024, 2048, 3072, 4096, 8192, 16384)
WH_TFLOPS = {
    ("bf16", "HiFi4"): (21.05, 45.72, 51.67, 51.87, 50.69, 52.74, 54.26),
    ("bf16", "HiFi2"): (21.40, 57.58, 76.64, 74.95, 68.45, 81.13, 85.36),
    ("bfp8", "HiFi2"): (24.87, 77.97, 96.41, 99.92, 94.70, 100.01, 102.44),
    ("bfp8", "LoFi"): (23.88, 92.80, 138.10, 141.72, 140.53, 155.56, 163.19),
    ("bfp4", "LoFi"): (26.86, 116.22, 183.06, 195.80, 196.81, 195.91, 199.72),
}
# test_benchmark.py's rows (per-core base m = k = n = size / 8) for WH_SIZES:
# (in0 and out L1-sharded, in0_block_w_div, num_out_blocks_h, num_out_blocks_w)
_L1, _L1_2, _L1_4 = (1, 1, 1, 1), (1, 2, 1, 1), (1, 4, 1, 1)
WH_CONFIGS = {
    "bf16": (_L1, _L1, _L1, _L1_4, (0, 1, 2, 2), (0, 2, 4, 4), (0, 4, 8, 8)),
    "bfp8": (_L1, _L1, _L1, _L1_2, (0, 1, 2, 2), (0, 2, 4, 4), (0, 4, 8, 8)),
    "bfp4": (_L1, _L1, _L1, _L1, _L1_2, (0, 2, 2, 2), (0, 4, 4, 4)),
}
# PERF_ANCHORS sec. 3 P150 best results: (dtype, fidelity, per-core base m, k, n, config, grid (x, y), TFLOPS)
BH_POINTS = (
    ("bf16", "HiFi4", (256, 384, 384), (1, 2, 1, 1), (11, 10), 142.42),
    ("bf16", "HiFi4", (512, 512, 512), (0, 1, 2, 2), (11, 10), 136.39),
    ("bf16", "HiFi2", (256, 384, 384), (1, 2, 1, 1), (11, 10), 267.99),
    ("bf16", "HiFi2", (1024, 1024, 1024), (0, 2, 4, 4), (11, 10), 253.00),
    ("bfp8", "HiFi2", (384, 384, 512), (1, 2, 1, 1), (11, 10), 274.33),
    ("bfp8", "LoFi", (384, 384, 512), (1, 2, 1, 1), (11, 10), 526.97),
    ("bfp8", "LoFi", (1024, 1024, 1024), (0, 2, 4, 4), (11, 10), 498.95),
    ("bfp4", "LoFi", (1024, 1024, 1024), (0, 2, 2, 2), (11, 10), 541.95),
    ("bf16", "HiFi4", (256, 384, 384), (1, 2, 1, 1), (13, 10), 168.55),
    ("bf16", "HiFi4", (512, 512, 512), (0, 1, 2, 2), (13, 10), 160.95),
    ("bf16", "HiFi4", (2048, 2048, 2048), (0, 4, 8, 8), (13, 10), 141.19),
    ("bf16", "HiFi2", (256, 384, 384), (1, 2, 1, 1), (13, 10), 317.61),
    ("bf16", "HiFi2", (1024, 1024, 1024), (0, 2, 4, 4), (13, 10), 285.26),
    ("bfp8", "HiFi2", (384, 384, 512), (1, 2, 1, 1), (13, 10), 325.28),
    ("bfp8", "LoFi", (384, 384, 512), (1, 2, 1, 1), (13, 10), 625.90),
    ("bfp8", "LoFi", (1024, 1024, 1024), (0, 2, 4, 4), (13, 10), 586.44),
    ("bfp4", "LoFi", (512, 512, 512), (1, 2, 1, 1), (13, 10), 641.34),
)
# S16 report.md: DEVICE KERNEL DURATION [ns] of 100 iterations of a 16x16-tile output, K = 1 tile, HiFi2, bf16
S16_NS = {(1, 1): 1039712.3, (1, 8): 710175.8, (2, 2): 741177.5}


def _gemm_point(label: str, arch: str, dtype: str, fid: str, mkn: tuple, cfg: tuple, grid: tuple, tflops: float):
    l1, div, nbh, nbw = cfg
    c = ref.benchmark_config(*mkn, grid, dtype, fid, bool(l1), bool(l1), div, nbh, nbw)
    return Point(label, arch, c, c.flops / tflops / 1e12)


def points() -> list[Point]:
    out = []
    for (dtype, fid), row in WH_TFLOPS.items():
        for n, tflops, cfg in zip(WH_SIZES, row, WH_CONFIGS[dtype]):
            where = "L1" if cfg[0] else "DRAM"
            out.append(_gemm_point(f"n150 8x8 {dtype} {fid} {n}^3 {where}", "wormhole_b0", dtype, fid, (n, n, n),
                                   cfg, (8, 8), tflops))
    for dtype, fid, base, cfg, grid, tflops in BH_POINTS:
        gx, gy = grid
        mkn = (base[0] * gy, base[1] * gx, base[2] * gx)
        where = "L1" if cfg[0] else "DRAM"
        out.append(_gemm_point(f"p150 {gx}x{gy} {dtype} {fid} {'x'.join(map(str, mkn))} {where}", "blackhole",
                               dtype, fid, mkn, cfg, grid, tflops))
    for sb, ns in S16_NS.items():
        c = ref.MatmulConfig(512, 32, 512, (1, 1), "Float16_b", "HiFi2", 1, 16, 16, 16, 16, sb, True, True,
                             resident=True, iterations=100)
        out.append(Point(f"p150 1 core bf16 HiFi2 {sb[0]}x{sb[1]} subblock (S16)", "blackhole", c, ns * 1e-9, True))
    return out


def modeled_seconds(p: Point, groups, perf=None) -> float:
    perf = perf or PERF[p.arch]
    model = pm.evaluate_groups(groups, p.arch, p.config.fidelity, "calibration", perf)
    return model["seconds"] - (perf.launch_seconds if p.device_timed else 0.0)


def errors(pts: list[Point], groups: list, perfs: dict | None = None) -> list[float]:
    """(modeled - measured) / measured, per point."""
    perfs = perfs or PERF
    return [modeled_seconds(p, g, perfs[p.arch]) / p.measured_s - 1 for p, g in zip(pts, groups)]


def summary_line(errs: list[float]) -> str:
    a = [abs(e) * 100 for e in errs]
    return f"calibration: median |err| {statistics.median(a):.1f}%, worst {max(a):.1f}% over {len(a)} points"


def run() -> tuple[list[Point], list[float]]:
    """The points and their errors under device.PERF (what tests/tt/test_perf_model.py bounds)."""
    pts = points()
    groups = [pm.group_works(ref.matmul_work(p.config)) for p in pts]
    return pts, errors(pts, groups)


# ---- fitting ------------------------------------------------------------------------------------------------
FIDELITIES = ("LoFi", "HiFi2", "HiFi4")
FORMATS = ("Float16_b", "Bfp8_b", "Bfp4_b")


def _perfs(x, per_format: bool) -> dict:
    """device.PERF with the fitted constants replaced by the vector ``x``."""
    out, i = {}, 0
    for arch in ("wormhole_b0", "blackhole"):
        eff = dict(zip(FIDELITIES, x[i:i + 3]))
        eff["HiFi3"] = (eff["HiFi2"] + eff["HiFi4"]) / 2
        i += 3
        rates = {"unpack_bytes_per_cycle": x[i]}
        if per_format:
            rates["unpack_bytes_per_cycle_by_format"] = tuple(zip(FORMATS, x[i:i + 3]))
        i += 3 if per_format else 1
        out[arch] = dataclasses.replace(PERF[arch], fpu_efficiency_by_fidelity=tuple(eff.items()),
                                        launch_seconds=x[-1], **rates)
    return out


def _start(per_format: bool) -> list[float]:
    x = []
    for arch in ("wormhole_b0", "blackhole"):
        x += [PERF[arch].fpu_eff(f) for f in FIDELITIES]
        x += [PERF[arch].unpack_bytes_per_cycle] * (3 if per_format else 1)
    return x + [PERF["wormhole_b0"].launch_seconds]


def nelder_mead(f, x0: list[float], iters: int = 3000) -> list[float]:
    """Minimise f from x0 (steps of 10% of each coordinate)."""
    simplex = [list(x0)] + [[v * (1.1 if j == i else 1.0) for j, v in enumerate(x0)] for i in range(len(x0))]
    values = [f(x) for x in simplex]
    for _ in range(iters):
        order = sorted(range(len(simplex)), key=values.__getitem__)
        simplex, values = [simplex[i] for i in order], [values[i] for i in order]
        centre = [sum(c) / (len(simplex) - 1) for c in zip(*simplex[:-1])]
        worst = simplex[-1]

        def towards(t):
            return [c + t * (c - w) for c, w in zip(centre, worst)]

        r = towards(1.0)
        fr = f(r)
        if fr < values[0]:
            e = towards(2.0)
            fe = f(e)
            simplex[-1], values[-1] = (e, fe) if fe < fr else (r, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = r, fr
        else:
            c = towards(-0.5)
            fc = f(c)
            if fc < values[-1]:
                simplex[-1], values[-1] = c, fc
            else:
                simplex = [simplex[0]] + [[b + 0.5 * (v - b) for b, v in zip(simplex[0], s)] for s in simplex[1:]]
                values = [values[0]] + [f(s) for s in simplex[1:]]
    return simplex[0]


def polish(f, x: list[float]) -> list[float]:
    """Coordinate search with shrinking relative steps: the model's max() terms leave flat directions (a rate
    that binds on no point) in which Nelder-Mead's simplex collapses."""
    best = f(x)
    for step in (0.05, 0.02, 0.01, 0.005, 0.002):
        improved = True
        while improved:
            improved = False
            for i in range(len(x)):
                for sign in (1, -1):
                    y = list(x)
                    y[i] *= 1 + sign * step
                    fy = f(y)
                    if fy < best - 1e-12:
                        x, best, improved = y, fy, True
    return x


def fit(pts: list[Point], groups: list, per_format: bool) -> tuple[dict, list[float]]:
    """Least squares over log(modeled / measured) time; returns the fitted profiles and the residual errors."""
    n_rates = 3 if per_format else 1
    effs = [i for arch in range(2) for i in range(arch * (3 + n_rates), arch * (3 + n_rates) + 3)]

    def cost(x):
        if any(v <= 0 for v in x) or any(x[i] > 1 for i in effs):
            return 1e9
        return sum(math.log1p(e) ** 2 for e in errors(pts, groups, _perfs(x, per_format)))

    x = polish(cost, nelder_mead(cost, _start(per_format), 2000))
    perfs = _perfs(x, per_format)
    return perfs, errors(pts, groups, perfs)


def _print_fit(perfs: dict, errs: list[float]) -> None:
    for arch, p in perfs.items():
        eff = ", ".join(f"{k} {v:.3f}" for k, v in p.fpu_efficiency_by_fidelity)
        rates = dict(p.unpack_bytes_per_cycle_by_format) or {"all formats": p.unpack_bytes_per_cycle}
        print(f"fitted {arch}: FPU efficiency {eff}; operand feed (B/cycle) "
              + ", ".join(f"{k} {v:.1f}" for k, v in rates.items()))
    print(f"fitted launch {perfs['wormhole_b0'].launch_seconds * 1e6:.2f} us (both archs)")
    print("fit residuals: " + summary_line(errs).removeprefix("calibration: "))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fit", action="store_true", help="refit the constants and print them with the residuals")
    parser.add_argument("--fit-per-format", action="store_true", help="fit one operand-feed rate per data format")
    args = parser.parse_args()
    pts = points()
    groups = [pm.group_works(ref.matmul_work(p.config)) for p in pts]
    if args.fit or args.fit_per_format:
        _print_fit(*fit(pts, groups, args.fit_per_format))
    errs = errors(pts, groups)
    print(f"{'point':52s} {'measured':>10s} {'model':>10s} {'measured':>9s} {'model':>9s} {'err':>7s}")
    print(f"{'':52s} {'us':>10s} {'us':>10s} {'TFLOPS':>9s} {'TFLOPS':>9s} {'(time)':>7s}")
    for p, e in zip(pts, errs):
        model_s = p.measured_s * (1 + e)
        print(f"{p.label:52s} {p.measured_s * 1e6:10.1f} {model_s * 1e6:10.1f} {p.measured_tflops:9.2f} "
              f"{p.config.flops / model_s / 1e12:9.2f} {e * 100:+6.1f}%")
    print("(model: TTNN's program for each point, tilelang_tt/ttnn_reference.py, priced by perf_model with "
          "device.PERF; S16 rows are device kernel durations, modeled without launch)")
    print(summary_line(errs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
