"""TT backend manifest: registers the ``tt`` target with TileLang's backend registry."""

from tilelang.backend.device_codegen import DeviceCodegen
from tilelang.backend.execution_backend import ExecutionBackendSpec
from tilelang.backend.module import BackendModule, register_backend
from tilelang.backend.pass_pipeline import PassPipeline
from tilelang.backend.target import register_target_normalizer

from . import codegen, pipeline
from ._tilelang_hooks import EXECUTION_BACKEND, install_kernel_cache
from .runtime import TTKernelCache
from .target import is_tt_target, normalize_tt_target

TARGET_KIND = "ext_dev"   # TileLang's TVM has no "tt" kind; tt targets are ext_dev targets keyed "tt"

register_target_normalizer("tt", normalize_tt_target, override=True)

BACKEND = register_backend(
    BackendModule(
        name="tt",
        target_kinds=(TARGET_KIND,),
        supports_target=is_tt_target,
        pipelines={TARGET_KIND: PassPipeline(TARGET_KIND, pipeline.TTPassPipelineBody)},
        device_codegens={TARGET_KIND: DeviceCodegen("tt", build_without_compile=codegen.build_tt_without_compile)},
        execution_backends=(ExecutionBackendSpec(EXECUTION_BACKEND, supports_target=is_tt_target),),
    )
)

install_kernel_cache(TTKernelCache())
