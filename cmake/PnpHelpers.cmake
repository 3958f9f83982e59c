# pnp_add_module(NAME [SOURCES ...] [CUDA_SOURCES ...] [DEPS ...])
#   A static library pnp_<NAME> with the public headers in include/. CUDA_SOURCES are
#   compiled only when PNP_CUDA is on, and then PNP_HAVE_CUDA=1 is defined for users.
function(pnp_add_module name)
  cmake_parse_arguments(A "" "" "SOURCES;CUDA_SOURCES;DEPS" ${ARGN})
  set(srcs ${A_SOURCES})
  if(PNP_CUDA)
    list(APPEND srcs ${A_CUDA_SOURCES})
  endif()
  add_library(pnp_${name} STATIC ${srcs})
  target_include_directories(pnp_${name} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include> $<INSTALL_INTERFACE:include>)
  target_link_libraries(pnp_${name} PUBLIC ${A_DEPS})
  target_compile_options(pnp_${name} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra>)
  if(PNP_CUDA)
    target_compile_definitions(pnp_${name} PUBLIC PNP_HAVE_CUDA=1)
    set_target_properties(pnp_${name} PROPERTIES CUDA_SEPARABLE_COMPILATION OFF)
  endif()
  if(PNP_NCCL)
    target_compile_definitions(pnp_${name} PUBLIC PNP_HAVE_NCCL=1)
  endif()
endfunction()

# pnp_module_libraries(OUT REGEX MODULE...): the pnp_<module> target of each MODULE that has
#   one whose TYPE matches REGEX (e.g. "^(STATIC|SHARED)_LIBRARY$"), in order.
function(pnp_module_libraries out regex)
  set(libs)
  foreach(m IN LISTS ARGN)
    if(TARGET pnp_${m})
      get_target_property(type pnp_${m} TYPE)
      if(type MATCHES "${regex}")
        list(APPEND libs pnp_${m})
      endif()
    endif()
  endforeach()
  set(${out} ${libs} PARENT_SCOPE)
endfunction()

# pnp_add_app(NAME SOURCES ... DEPS ...): a program in apps/ (apps/<name>.cpp, or apps/<name>/
# when it needs more than one file) that owns its command line and output; the logic it calls
# lives in the libraries.
function(pnp_add_app name)
  cmake_parse_arguments(A "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${A_SOURCES})
  target_link_libraries(${name} PRIVATE ${A_DEPS})
  target_compile_options(${name} PRIVATE -Wall -Wextra)
  install(TARGETS ${name} RUNTIME DESTINATION bin)
endfunction()

# Shared doctest mains: one plain, one that wraps MPI_Init/Finalize and combines results.
if(PNP_BUILD_TESTS AND NOT TARGET pnp_doctest_main)
  add_library(pnp_doctest_main STATIC ${PROJECT_SOURCE_DIR}/test/support/doctest_main.cpp)
  target_link_libraries(pnp_doctest_main PUBLIC doctest::doctest)
  add_library(pnp_doctest_mpi_main STATIC ${PROJECT_SOURCE_DIR}/test/support/doctest_mpi_main.cpp)
  target_link_libraries(pnp_doctest_mpi_main PUBLIC doctest::doctest MPI::MPI_CXX)
  target_include_directories(pnp_doctest_main PUBLIC ${PROJECT_SOURCE_DIR}/test/support)
  target_include_directories(pnp_doctest_mpi_main PUBLIC ${PROJECT_SOURCE_DIR}/test/support)
endif()

# The mpiexec prefix for tests (root needs --allow-run-as-root; 2-core CI needs --oversubscribe).
set(PNP_MPIEXEC ${MPIEXEC_EXECUTABLE} --oversubscribe)
execute_process(COMMAND id -u OUTPUT_VARIABLE _pnp_uid OUTPUT_STRIP_TRAILING_WHITESPACE)
if(_pnp_uid STREQUAL "0")
  list(APPEND PNP_MPIEXEC --allow-run-as-root)
endif()

# pnp_add_test(NAME SOURCES ... DEPS ... [RANKS n ...] [TIMEOUT s] [LABELS ...])
#   One doctest executable test_<NAME>. Without RANKS it runs serially; with RANKS it
#   runs once under mpiexec per rank count (MPI main), as test <NAME>_np<n>.
function(pnp_add_test name)
  cmake_parse_arguments(A "" "TIMEOUT" "SOURCES;DEPS;RANKS;LABELS" ${ARGN})
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 600)
  endif()
  add_executable(test_${name} ${A_SOURCES})
  if(A_RANKS)
    target_link_libraries(test_${name} PRIVATE pnp_doctest_mpi_main ${A_DEPS})
  else()
    target_link_libraries(test_${name} PRIVATE pnp_doctest_main ${A_DEPS})
  endif()
  target_compile_definitions(test_${name} PRIVATE
    PNP_SOURCE_DIR="${PROJECT_SOURCE_DIR}" PNP_BINARY_DIR="${PROJECT_BINARY_DIR}")
  if(A_RANKS)
    foreach(n IN LISTS A_RANKS)
      add_test(NAME ${name}_np${n}
               COMMAND ${PNP_MPIEXEC} ${MPIEXEC_NUMPROC_FLAG} ${n} $<TARGET_FILE:test_${name}>)
      set_tests_properties(${name}_np${n} PROPERTIES TIMEOUT ${A_TIMEOUT} LABELS "mpi;${A_LABELS}"
                           PROCESSORS ${n} WORKING_DIRECTORY ${PROJECT_BINARY_DIR})
    endforeach()
  else()
    add_test(NAME ${name} COMMAND test_${name})
    set_tests_properties(${name} PROPERTIES TIMEOUT ${A_TIMEOUT} LABELS "${A_LABELS}"
                         WORKING_DIRECTORY ${PROJECT_BINARY_DIR})
  endif()
endfunction()
