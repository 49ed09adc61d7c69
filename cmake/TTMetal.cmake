# Locates a TT-Metalium SDK for -DTL_TT_BACKEND=ON: $TT_METAL_HOME or an installed tt-metalium package.
if(DEFINED ENV{TT_METAL_HOME})
  list(APPEND CMAKE_PREFIX_PATH "$ENV{TT_METAL_HOME}/build" "$ENV{TT_METAL_HOME}")
endif()
find_package(TT-Metalium REQUIRED)
message(STATUS "tilelang-tt: TT-Metalium found: ${TT-Metalium_DIR}")
