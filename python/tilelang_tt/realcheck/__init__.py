"""Check generated artifacts against the real TT-Metalium 0.81 SDK (the ttnn 0.81.1 wheel's headers and library).

``check_artifact(dir)`` compiles every kernel through the real firmware wrappers for the processors the plan
assigns (``kernels.py``) and compiles the host program against declarations of the 0.81.1 host API generated
from ``libtt_metal.so``'s exports, then matches it against the plan (``host.py``). The CLI is ``tilelang-tt check DIR``.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from .host import HostCheck, check_host
from .kernels import TUResult, check_kernels, toolchain_available
from .sdk import TTCheckError


@dataclass
class CheckResult:
    artifact: Path
    units: list[TUResult]
    host: HostCheck
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return all(u.ok for u in self.units) and self.host.ok

    def first_error(self) -> str | None:
        for u in self.units:
            if not u.ok:
                return f"{u.kernel} [{u.unit}]: {u.first_error()}"
        return self.host.problems[0] if self.host.problems else None

    def summary(self) -> str:
        lines = [f"{'PASS' if u.ok else 'FAIL'} {u.kernel:22s} {u.unit:16s} {u.seconds:5.2f} s" for u in self.units]
        lines.append(f"{'PASS' if self.host.ok else 'FAIL'} host.cpp               g++ -std=c++20 against the 0.81.1 host "
                     f"API ({len(self.host.checked)} APIs declared from libtt_metal.so exports), plan protocol")
        lines += [f"     {p}" for p in self.host.problems]
        return "\n".join(lines)


def check_artifact(artifact: Path, jobs: int | None = None) -> CheckResult:
    artifact = Path(artifact)
    plan_path = artifact / "tt.plan.json"
    if not plan_path.is_file():
        raise TTCheckError(f"{artifact} has no tt.plan.json", construct="tilelang-tt check",
                           fix="pass a directory written by tilelang.compile(..., target='tt') or `tilelang-tt compile`")
    plan = json.loads(plan_path.read_text())
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=1) as pool:   # the host compile runs beside the kernel compiles
        host_future = pool.submit(check_host, artifact / "host.cpp", plan)
        units = check_kernels(plan, artifact, jobs)
        host = host_future.result()
    return CheckResult(artifact, units, host, time.perf_counter() - t0)


__all__ = ["CheckResult", "TTCheckError", "check_artifact", "toolchain_available"]
