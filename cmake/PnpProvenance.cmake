# The git commit is stamped at build time (not configure time) so that outputs never
# carry a stale commit. pnp_provenance is a tiny library holding only that string.
set(PNP_PROVENANCE_CPP "${PROJECT_BINARY_DIR}/generated/pnp_provenance.cpp")
add_custom_target(pnp_provenance_stamp
  COMMAND ${CMAKE_COMMAND} -DSRC=${PROJECT_SOURCE_DIR} -DOUT=${PNP_PROVENANCE_CPP}
          -DVERSION=${PROJECT_VERSION} -P ${PROJECT_SOURCE_DIR}/cmake/PnpStampCommit.cmake
  BYPRODUCTS ${PNP_PROVENANCE_CPP}
  COMMENT "Stamping git commit")
add_library(pnp_provenance STATIC ${PNP_PROVENANCE_CPP})
add_dependencies(pnp_provenance pnp_provenance_stamp)
