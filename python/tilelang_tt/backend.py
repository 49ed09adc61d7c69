"""TT backend manifest: registers the ``tt`` target with TileLang's backend registry.

The pass pipeline and the codegen (Jinja2, jsonschema, the passes) are imported on the first compile, not by
``import tilelang_tt``: the manifest only holds thin entry points.
"""

from tilelang.backend.device_codegen import DeviceCodegen
from tilelang.backend.execution_backend import ExecutionBackendSpec
from tilelang.backend.module import BackendModule, register_backend
from tilelang.backend.pass_pipeline import PassPipeline

from ._tilelang_hooks import (EXECUTION_BACKEND, install_kernel_cache, keep_tt_autotune_results_in_memory,
                              register_target_normalizer_first)
from .runtime import TTKernelCache
from .target import is_tt_target, normalize_tt_target

TARGET_KIND = "ext_dev"   # TileLang's TVM has no "tt" kind; tt targets are ext_dev targets keyed "tt"


def _pass_pipeline(mod, target):
    from .pipeline import TTPassPipelineBody

    return TTPassPipelineBody(mod, target)


def _build_without_compile(mod, target):
    from . import codegen

    if codegen._ENV.bytecode_cache is None:     # compiled templates persist across processes (cache.py)
        from .cache import template_bytecode_cache

        codegen._ENV.bytecode_cache = template_bytecode_cache()
    return codegen.build_tt_without_compile(mod, target)


register_target_normalizer_first("tt", normalize_tt_target)

BACKEND = register_backend(
    BackendModule(
        name="tt",
        target_kinds=(TARGET_KIND,),
        supports_target=is_tt_target,
        pipelines={TARGET_KIND: PassPipeline(TARGET_KIND, _pass_pipeline)},
        device_codegens={TARGET_KIND: DeviceCodegen("tt", build_without_compile=_build_without_compile)},
        execution_backends=(ExecutionBackendSpec(EXECUTION_BACKEND, supports_target=is_tt_target),),
    )
)

install_kernel_cache(TTKernelCache())
keep_tt_autotune_results_in_memory()
