# Installation and export: `cmake --install BUILD --prefix PREFIX` places
#   bin/                    the programs (installed by pnp_add_app)
#   include/pnp/            the public headers
#   lib/libpnp_*.a          the module libraries (and the small libraries they link)
#   lib/cmake/pnp/          pnpConfig.cmake, its version file and the exported pnp:: targets
#   share/pnp/models/       the shipped denoiser weights (when models/ exists)
#   share/pnp/python/       the inductor backend's exporter (pnp_inductor), the peer arm (pnp_peer)
# so that another CMake project can write
#   find_package(pnp 0.1 REQUIRED)
#   target_link_libraries(app PRIVATE pnp::pnp_core pnp::pnp_io)
# pnpConfig.cmake re-finds Torch, MPI and HDF5 (and toml++, Boost, CUDA where the exported
# libraries link them) with find_dependency.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(PNP_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/pnp" CACHE STRING
    "Where pnpConfig.cmake is installed, relative to the prefix")

# --- which libraries to install -----------------------------------------------------
# Every pnp_<module> library (a module may declare several, e.g. pnp_nn and pnp_nn_ir), then
# every library of this project that they link (pnp_provenance, pnp_hdf5, pnp_nccl, ...):
# an exported target may only link targets that are exported too.
set(_pnp_roots)
foreach(_m IN LISTS PNP_MODULES)
  pnp_module_libraries(_own "_LIBRARY$" ${_m})
  list(APPEND _pnp_roots ${_own})
  if(EXISTS "${PROJECT_SOURCE_DIR}/src/${_m}/CMakeLists.txt")
    get_property(_dir_targets DIRECTORY "${PROJECT_SOURCE_DIR}/src/${_m}" PROPERTY BUILDSYSTEM_TARGETS)
    foreach(_t IN LISTS _dir_targets)
      get_target_property(_type ${_t} TYPE)
      if(_t MATCHES "^pnp_" AND _type MATCHES "^(STATIC|SHARED|INTERFACE)_LIBRARY$")
        list(APPEND _pnp_roots ${_t})
      endif()
    endforeach()
  endif()
endforeach()
list(REMOVE_DUPLICATES _pnp_roots)

set(_pnp_export_targets)
set(_pnp_imported)
set(_pnp_todo ${_pnp_roots})
while(_pnp_todo)
  list(POP_FRONT _pnp_todo _t)
  if(_t IN_LIST _pnp_export_targets)
    continue()
  endif()
  list(APPEND _pnp_export_targets ${_t})
  get_target_property(_type ${_t} TYPE)
  set(_links)
  foreach(_prop LINK_LIBRARIES INTERFACE_LINK_LIBRARIES)
    if(_type STREQUAL "INTERFACE_LIBRARY" AND _prop STREQUAL "LINK_LIBRARIES")
      continue()
    endif()
    get_target_property(_l ${_t} ${_prop})
    if(_l)
      list(APPEND _links ${_l})
    endif()
  endforeach()
  foreach(_l IN LISTS _links)
    string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" _l "${_l}")
    if(_l MATCHES "^\\$<" OR NOT TARGET "${_l}")
      continue()   # a path, a flag or a generator expression: exported as written
    endif()
    get_target_property(_alias ${_l} ALIASED_TARGET)
    if(_alias)
      set(_l ${_alias})
    endif()
    get_target_property(_imp ${_l} IMPORTED)
    if(_imp)
      list(APPEND _pnp_imported ${_l})
    elseif(NOT _l IN_LIST _pnp_export_targets)
      list(APPEND _pnp_todo ${_l})
    endif()
  endforeach()
endwhile()
list(REMOVE_DUPLICATES _pnp_imported)

# Which find_dependency calls pnpConfig.cmake needs besides Torch, MPI and HDF5.
set(PNP_CONFIG_NEEDS_TOML OFF)
set(PNP_CONFIG_NEEDS_BOOST OFF)
set(PNP_CONFIG_NEEDS_CUDA ${PNP_CUDA})
foreach(_i IN LISTS _pnp_imported)
  if(_i MATCHES "^tomlplusplus::")
    set(PNP_CONFIG_NEEDS_TOML ON)
  elseif(_i MATCHES "^Boost::")
    set(PNP_CONFIG_NEEDS_BOOST ON)
  elseif(_i MATCHES "^CUDA::")
    set(PNP_CONFIG_NEEDS_CUDA ON)
  endif()
endforeach()

# Installed programs find LibTorch, MPI and HDF5 where they were found at build time.
get_property(_pnp_app_targets DIRECTORY "${PROJECT_SOURCE_DIR}/apps" PROPERTY BUILDSYSTEM_TARGETS)
foreach(_t IN LISTS _pnp_app_targets)
  get_target_property(_type ${_t} TYPE)
  if(_type STREQUAL "EXECUTABLE")
    set_target_properties(${_t} PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
  endif()
endforeach()

# --- install ------------------------------------------------------------------------
install(TARGETS ${_pnp_export_targets} EXPORT pnpTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/pnp" DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.hpp" PATTERN "*.h")
# pnp's Python helpers, found there by an installed pnp: the inductor backend's exporter and
# pnp_bench's torch.compile peer arm.
foreach(helper pnp_inductor pnp_peer)
  if(IS_DIRECTORY "${PROJECT_SOURCE_DIR}/python/${helper}")
    install(DIRECTORY "${PROJECT_SOURCE_DIR}/python/${helper}" DESTINATION ${CMAKE_INSTALL_DATADIR}/pnp/python
            PATTERN "__pycache__" EXCLUDE)
  endif()
endforeach()
if(IS_DIRECTORY "${PROJECT_SOURCE_DIR}/models")
  install(DIRECTORY "${PROJECT_SOURCE_DIR}/models/" DESTINATION ${CMAKE_INSTALL_DATADIR}/pnp/models)
endif()
install(EXPORT pnpTargets NAMESPACE pnp:: DESTINATION ${PNP_INSTALL_CMAKEDIR})

configure_package_config_file("${PROJECT_SOURCE_DIR}/cmake/pnpConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/pnpConfig.cmake" INSTALL_DESTINATION ${PNP_INSTALL_CMAKEDIR})
write_basic_package_version_file("${PROJECT_BINARY_DIR}/pnpConfigVersion.cmake"
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/pnpConfig.cmake" "${PROJECT_BINARY_DIR}/pnpConfigVersion.cmake"
        DESTINATION ${PNP_INSTALL_CMAKEDIR})

string(REPLACE ";" " " _pnp_msg "${_pnp_export_targets}")
message(STATUS "pnp install: exports ${_pnp_msg}")
