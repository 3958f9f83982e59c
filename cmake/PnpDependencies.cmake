# Every dependency is found with find_package (or a find_library fallback where the
# package ships no config). A missing one stops configuration with the name of the
# package that provides it; scripts/bootstrap.sh installs all of them.

function(pnp_require found what hint)
  if(NOT ${found})
    message(FATAL_ERROR "pnp: ${what} not found. Install it with: ${hint}\n"
                        "(scripts/bootstrap.sh installs every dependency)")
  endif()
endfunction()

# --- LibTorch, from the torch==2.11.0 wheel --------------------------------------
if(NOT Torch_DIR)
  find_package(Python3 COMPONENTS Interpreter QUIET)
  if(Python3_Interpreter_FOUND)
    execute_process(COMMAND ${Python3_EXECUTABLE} -c "import torch;print(torch.utils.cmake_prefix_path)"
                    OUTPUT_VARIABLE _pnp_torch_prefix OUTPUT_STRIP_TRAILING_WHITESPACE
                    RESULT_VARIABLE _pnp_torch_rc ERROR_QUIET)
    if(_pnp_torch_rc EQUAL 0)
      list(APPEND CMAKE_PREFIX_PATH "${_pnp_torch_prefix}")
    endif()
  endif()
endif()
# Torch's config probes the GPU for its arch list unless told; there may be no GPU here.
if(NOT DEFINED TORCH_CUDA_ARCH_LIST AND NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
  set(TORCH_CUDA_ARCH_LIST "8.0;9.0")
endif()
find_package(Torch QUIET)
pnp_require(Torch_FOUND "LibTorch" "python3 -m pip install torch==2.11.0")
if(NOT Torch_VERSION VERSION_EQUAL 2.11.0)
  message(WARNING "pnp is pinned to torch 2.11.0; found ${Torch_VERSION}")
endif()

# Threads (the phantom rasteriser splits large rasters over std::threads).
find_package(Threads REQUIRED)

# --- MPI, HDF5, toml++, Boost.Program_options, doctest ---------------------------
find_package(MPI COMPONENTS C CXX QUIET)
pnp_require(MPI_CXX_FOUND "MPI" "apt-get install libopenmpi-dev openmpi-bin")
find_package(HDF5 COMPONENTS C QUIET)
pnp_require(HDF5_FOUND "HDF5" "apt-get install libhdf5-dev")
if(NOT TARGET pnp_hdf5)
  add_library(pnp_hdf5 INTERFACE)
  target_include_directories(pnp_hdf5 SYSTEM INTERFACE ${HDF5_INCLUDE_DIRS})
  target_link_libraries(pnp_hdf5 INTERFACE ${HDF5_C_LIBRARIES})
  target_compile_definitions(pnp_hdf5 INTERFACE ${HDF5_DEFINITIONS})
endif()
find_package(tomlplusplus QUIET)
pnp_require(tomlplusplus_FOUND "toml++" "apt-get install libtomlplusplus-dev")
find_package(Boost COMPONENTS program_options QUIET)
pnp_require(Boost_FOUND "Boost.Program_options" "apt-get install libboost-program-options-dev")
if(PNP_BUILD_TESTS)
  find_package(doctest QUIET)
  pnp_require(doctest_FOUND "doctest" "apt-get install doctest-dev")
endif()

# --- CUDA and NCCL (optional on CPU-only builds) ----------------------------------
set(PNP_CUDA OFF)
if(NOT PNP_WITH_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER AND TORCH_CUDA_LIBRARIES)
    if(NOT CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 80 90)
    endif()
    enable_language(CUDA)
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit REQUIRED)
    set(PNP_CUDA ON)
  elseif(PNP_WITH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "pnp: PNP_WITH_CUDA=ON but no CUDA compiler (install the CUDA toolkit, nvcc) "
                        "or LibTorch without CUDA support (install the CUDA torch==2.11.0 wheel)")
  endif()
endif()

set(PNP_NCCL OFF)
if(PNP_CUDA)
  file(GLOB _pnp_nccl_hints LIST_DIRECTORIES true
       "${Python3_SITELIB}/nvidia/nccl" "${_pnp_torch_prefix}/../../../nvidia/nccl"
       "${_pnp_torch_prefix}/../../../nvidia/cu13")
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${_pnp_nccl_hints} ENV NCCL_HOME
            PATHS /usr/local/cuda /usr PATH_SUFFIXES include)
  find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${_pnp_nccl_hints} ENV NCCL_HOME
               PATHS /usr/local/cuda /usr PATH_SUFFIXES lib lib64 lib/x86_64-linux-gnu)
  if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    add_library(pnp_nccl INTERFACE)
    target_include_directories(pnp_nccl SYSTEM INTERFACE ${NCCL_INCLUDE_DIR})
    target_link_libraries(pnp_nccl INTERFACE ${NCCL_LIBRARY})
    set(PNP_NCCL ON)
  else()
    message(STATUS "pnp: NCCL not found (apt-get install libnccl-dev); GPU traffic uses host-staged MPI")
  endif()
endif()

# --- cuDNN graphs through the cuDNN frontend (optional, CUDA builds) -----------------
# The native backend's conv + residual-add epilogues (src/nn/native/cudnn_epilogue.hpp): the
# frontend's C++ headers (pip install nvidia-cudnn-frontend: they land in site-packages/include,
# or set CUDNN_FRONTEND_INCLUDE) and the cuDNN that LibTorch runs with (the nvidia-cudnn wheel).
set(PNP_CUDNN_FE OFF)
if(PNP_CUDA)
  get_filename_component(_pnp_site "${Torch_DIR}/../../../.." ABSOLUTE)  # site-packages
  find_path(CUDNN_FRONTEND_INCLUDE_DIR cudnn_frontend.h HINTS ENV CUDNN_FRONTEND_INCLUDE "${_pnp_site}/include"
            "${Python3_SITELIB}/include" NO_CACHE)
  find_path(PNP_CUDNN_INCLUDE_DIR cudnn.h HINTS "${_pnp_site}/nvidia/cudnn/include" "${Python3_SITELIB}/nvidia/cudnn/include"
            PATHS /usr/local/cuda /usr PATH_SUFFIXES include)
  find_library(PNP_CUDNN_LIBRARY NAMES libcudnn.so.9 cudnn HINTS "${_pnp_site}/nvidia/cudnn/lib"
               "${Python3_SITELIB}/nvidia/cudnn/lib" PATHS /usr/local/cuda /usr PATH_SUFFIXES lib lib64 lib/x86_64-linux-gnu)
  if(CUDNN_FRONTEND_INCLUDE_DIR AND PNP_CUDNN_INCLUDE_DIR AND PNP_CUDNN_LIBRARY)
    add_library(pnp_cudnn_fe INTERFACE)
    # (for pnp_nn's build only: the headers may lie in the source tree, e.g. .deps/ on the device machine)
    target_include_directories(pnp_cudnn_fe SYSTEM INTERFACE $<BUILD_INTERFACE:${CUDNN_FRONTEND_INCLUDE_DIR}>
                               $<BUILD_INTERFACE:${PNP_CUDNN_INCLUDE_DIR}>)
    target_link_libraries(pnp_cudnn_fe INTERFACE ${PNP_CUDNN_LIBRARY} CUDA::cudart)
    set(PNP_CUDNN_FE ON)
    message(STATUS "pnp: cuDNN frontend ${CUDNN_FRONTEND_INCLUDE_DIR}, cuDNN ${PNP_CUDNN_LIBRARY}: conv epilogues as cuDNN graphs")
  else()
    message(STATUS "pnp: cuDNN frontend headers not found (pip install nvidia-cudnn-frontend, or set "
                   "CUDNN_FRONTEND_INCLUDE): conv + residual add run as two ops")
  endif()
endif()

# --- pnp's Hopper implicit-GEMM convolution (optional, CUDA builds) ------------------
# src/nn/native/cuda/wgmma_conv_kernels.cu, built for sm_90a: CuTe's wgmma and bulk-copy wrappers and
# CUTLASS's barriers, header-only, from PyPI's nvidia-cutlass (pip install nvidia-cutlass: the
# headers are cutlass_library/source/include in site-packages), or set CUTLASS_INCLUDE.
set(PNP_WGMMA_CONV OFF)
if(PNP_CUDA AND CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 12.0)
  find_path(PNP_CUTLASS_INCLUDE_DIR cute/arch/mma_sm90_gmma.hpp HINTS ENV CUTLASS_INCLUDE
            "${_pnp_site}/cutlass_library/source/include" "${Python3_SITELIB}/cutlass_library/source/include" NO_CACHE)
  if(PNP_CUTLASS_INCLUDE_DIR)
    set(PNP_WGMMA_CONV ON)
    message(STATUS "pnp: CUTLASS headers ${PNP_CUTLASS_INCLUDE_DIR}: pnp's Hopper convolution (sm_90a)")
  else()
    message(STATUS "pnp: CUTLASS headers not found (pip install nvidia-cutlass, or set CUTLASS_INCLUDE): "
                   "no Hopper convolution of pnp's own, cuDNN's everywhere")
  endif()
endif()
