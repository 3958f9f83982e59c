// Error messages as one clear line: long values cut, line breaks removed. Every `error:` line a
// program prints goes through error_line (report_error, the MPI programs' collective errors).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace pnp {

// A value quoted in a message, cut after `max` characters: "<first max characters>... (N
// characters)", so that a 1 MB string or a 200 kB file name is not echoed whole.
std::string clip_value(std::string_view value, size_t max = 200);
// An error message as one line: line breaks become "; ", every run of more than 200 characters
// without a space is cut as clip_value does, and the whole is cut after 2000 characters.
std::string error_line(std::string_view message);
// A random identifier of this process's run (16 hex digits), made once: marks the files the run
// writes (its checkpoint) so that it removes only its own.
const std::string& run_id();

}  // namespace pnp
