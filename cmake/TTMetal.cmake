# TL_TT_BACKEND=ON: build host programs of tilelang-tt artifacts against a real TT-Metalium SDK.
#   SDK: $TT_METAL_HOME (a built tt-metal checkout: $TT_METAL_HOME/build has TT-MetaliumConfig.cmake) or an
#   installed tt-metalium package on CMAKE_PREFIX_PATH.
#   tl_tt_add_runner(<target> <artifact dir>) builds <artifact dir>/host.cpp into <target>.
if(DEFINED ENV{TT_METAL_HOME})
  list(APPEND CMAKE_PREFIX_PATH "$ENV{TT_METAL_HOME}/build" "$ENV{TT_METAL_HOME}")
endif()
find_package(TT-Metalium QUIET)
if(NOT TT-Metalium_FOUND)
  message(FATAL_ERROR
    "TL_TT_BACKEND=ON needs a TT-Metalium SDK, and none was found. Set TT_METAL_HOME to a built tt-metal "
    "checkout (with build/TT-MetaliumConfig.cmake) or add an installed tt-metalium to CMAKE_PREFIX_PATH. "
    "Builds without -DTL_TT_BACKEND=ON do not need it.")
endif()
message(STATUS "tilelang-tt: TT-Metalium found: ${TT-Metalium_DIR}")

function(tl_tt_add_runner target artifact_dir)
  if(NOT EXISTS "${artifact_dir}/host.cpp")
    message(FATAL_ERROR "tl_tt_add_runner: ${artifact_dir} has no host.cpp (not a tilelang-tt artifact)")
  endif()
  add_executable(${target} "${artifact_dir}/host.cpp")
  target_compile_features(${target} PRIVATE cxx_std_20)
  target_link_libraries(${target} PRIVATE TT::Metalium)
endfunction()
