"""A kernel of several ``T.Kernel`` launches: its stages' artifacts, run in order as TT programs on one queue.

SplitKernelsTT turns such a function into one kernel per launch (``<kernel>_k<i>``), each compiled into an ordinary
artifact. The sequence artifact holds them side by side, each in its own directory, with ``tt.sequence.json``:

    {"kernel": name, "params": n, "stages": [{"name", "dir"}],
     "intermediates": [{"name", "shape", "dtype", "param_index"}]}

Stage ``i`` takes the kernel's ``n`` parameters in their order, then the intermediates (``T.alloc_global``), which
the runtime allocates (zeroed) for each call. The caller sees the kernel's own parameters only: ``caller_plan``
gives each one's dtype, shape and how the sequence uses it (``io``: read before any stage writes it -> input or
inout; first written -> output).
"""

from __future__ import annotations

import json
from pathlib import Path

SEQUENCE_FILE = "tt.sequence.json"
_FIRST_BANNER = "// ===== "


class SequenceArtifact:
    """The stages' artifacts (``codegen.Artifact`` or ``artifact.StoredArtifact``) and the sequence description."""

    def __init__(self, name: str, description: dict, stage_files: list[dict[str, str]],
                 directory: Path | None = None, source_text: str | None = None):
        self.name, self.description, self.stage_files, self.directory = name, description, stage_files, directory
        self.source_text = source_text     # read back from the compile cache: the text source() gave
        self.stage_plans = [json.loads(files["tt.plan.json"]) for files in stage_files]
        self.plan = caller_plan(description, self.stage_plans)

    @classmethod
    def from_stages(cls, name: str, record, stages: list) -> SequenceArtifact:
        """From the stages' artifacts in order and their ``records.Sequence`` (the same intermediates in each)."""
        description = {"kernel": name, "params": int(record.params),
                       "stages": [{"name": art.name, "dir": art.name} for art in stages],
                       "intermediates": [{"name": str(t["name"]), "shape": [_dim(d) for d in t["shape"]],
                                          "dtype": str(t["dtype"]), "param_index": int(record.params) + k}
                                         for k, t in enumerate(record.intermediates)]}
        return cls(name, description, [art.files for art in stages])

    @classmethod
    def from_files(cls, name: str, files: dict[str, str], directory: Path | None = None,
                   source_text: str | None = None) -> SequenceArtifact:
        description = json.loads(files[SEQUENCE_FILE])
        stage_files = []
        for stage in description["stages"]:
            prefix = stage["dir"] + "/"
            stage_files.append({rel[len(prefix):]: text for rel, text in files.items() if rel.startswith(prefix)})
        return cls(name, description, stage_files, directory, source_text)

    @property
    def files(self) -> dict[str, str]:
        out = {SEQUENCE_FILE: json.dumps(self.description, indent=2) + "\n"}
        for stage, files in zip(self.description["stages"], self.stage_files):
            out.update({f"{stage['dir']}/{rel}": text for rel, text in files.items()})
        return out

    def stage_dirs(self) -> list[Path]:
        return [Path(self.directory) / stage["dir"] for stage in self.description["stages"]]

    def source(self) -> str:
        """Every stage's sources, each under a banner with its path."""
        if self.source_text is not None:
            return self.source_text
        parts = [f"{_FIRST_BANNER}{SEQUENCE_FILE} =====\n{self.files[SEQUENCE_FILE]}"]
        for stage, files in zip(self.description["stages"], self.stage_files):
            for rel in ("kernels/reader.cpp", "kernels/compute.cpp", "kernels/writer.cpp",
                        "kernels/dataflow_helpers.h", "host.cpp", "tt.plan.json", "CMakeLists.txt"):
                parts.append(f"{_FIRST_BANNER}{stage['dir']}/{rel} =====\n{files[rel]}")
        return "\n".join(parts)

    def host_source(self) -> str:
        """The stages' host programs, in launch order."""
        return "\n".join(f"// ===== {stage['dir']}/host.cpp (launch {i} of {len(self.stage_files)}) =====\n"
                         f"{files['host.cpp']}"
                         for i, (stage, files) in enumerate(zip(self.description["stages"], self.stage_files)))


def _dim(d):
    return int(d) if isinstance(d, int) or hasattr(d, "value") and isinstance(d.value, int) else str(d)


def caller_plan(description: dict, stage_plans: list[dict]) -> dict:
    """What a call of the sequence takes (the kernel's own parameters; the adapter reads ``buffers`` and
    ``scalar_args`` as of one kernel's plan), with each tensor's ``io`` over all stages, in order."""
    n = description["params"]
    buffers, scalars = {}, {}
    for plan in stage_plans:
        for arg in plan.get("scalar_args", []):
            scalars.setdefault(arg["param_index"], arg)
        for buf in plan["buffers"]:
            i = buf["param_index"]
            if i >= n or buf["io"] == "unused":
                continue
            reads, writes = buf["io"] in ("input", "inout"), buf["io"] in ("output", "inout")
            if i not in buffers:
                buffers[i] = dict(buf, io="input" if reads else "output", _writes=writes)
            else:
                buffers[i]["_writes"] |= writes
    for buf in buffers.values():
        if buf.pop("_writes") and buf["io"] == "input":
            buf["io"] = "inout"        # read first, then written: the caller's data goes in, the results come out
    precision = next((p["precision"] for p in stage_plans if "precision" in p), None)
    plan = {"kernel": description["kernel"], "sequence": description,
            "buffers": [buffers[i] for i in sorted(buffers)], "scalar_args": [scalars[i] for i in sorted(scalars)]}
    if precision is not None:
        plan["precision"] = precision
    return plan


def allocate_intermediates(description: dict, dims: dict[str, int]) -> list:
    """Zeroed torch tensors for the intermediates (``dims``: symbolic dimension -> value, from the call)."""
    import torch

    from .device import torch_dtype_name
    from .dims import dim_value

    return [torch.zeros([int(dim_value(d, dims)) for d in t["shape"]], dtype=getattr(torch, torch_dtype_name(t["dtype"])))
            for t in description["intermediates"]]


def combined_report(stage_reports: list[dict]) -> dict:
    """One report of a sequence's launches: each stage's report under ``stages``, the summed counters' time in
    ``model`` (``seconds``: the launches run one after the other)."""
    models = [r.get("model", {}) for r in stage_reports]
    model = {"label": next((m.get("label") for m in models if "label" in m), None), "stages": models}
    if all("seconds" in m for m in models):
        model["seconds"] = sum(m["seconds"] for m in models)
    return {"stages": stage_reports, "model": model}
