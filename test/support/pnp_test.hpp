// Every test includes this instead of <doctest/doctest.h>.
//
// LibTorch's c10/util/Logging.h defines a glog-style CHECK(condition) that aborts the process
// when the condition is false. Whichever of it and doctest's CHECK is defined last wins, so a
// test that included doctest before any ATen header ran c10's CHECK: a failure aborted the
// whole binary without a report, and passing checks were not counted. Including c10's header
// first and dropping its macro makes every CHECK in the tests doctest's.
#pragma once

#if __has_include(<c10/util/Logging.h>)
#include <c10/util/Logging.h>
#undef CHECK
#endif
#include <doctest/doctest.h>
