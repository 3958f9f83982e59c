// The shared checks (pnp/validate.hpp) and the one-line messages (pnp/messages.hpp).
#include "pnp_test.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>

#include "pnp/core.hpp"
#include "pnp/messages.hpp"
#include "pnp/validate.hpp"
#include "test_util.hpp"

using namespace pnp;
namespace fs = std::filesystem;

TEST_CASE("same_file: hard links, symlinks, and names of files that do not exist yet") {
  const fs::path dir = test::scratch_dir("validate_same");
  const fs::path a = dir / "a.h5", b = dir / "b.h5";
  CHECK(validate::same_file(a, dir / "." / "a.h5"));  // neither exists: the same name
  CHECK_FALSE(validate::same_file(a, b));
  fs::create_symlink(a, dir / "link.h5");  // dangles until a exists
  CHECK(validate::same_file(dir / "link.h5", a));
  std::ofstream(a) << "x";
  CHECK(validate::same_file(dir / "link.h5", a));
  fs::create_hard_link(a, dir / "hard.h5");
  CHECK(validate::same_file(dir / "hard.h5", a));
  CHECK_FALSE(validate::same_file(a, b));
  CHECK_THROWS_WITH_AS(validate::require_distinct({{"output.file", a}, {"output.checkpoint", dir / "hard.h5"}}),
                       doctest::Contains("are the same file"), InputError);
  CHECK_THROWS_WITH_AS(validate::require_distinct({{"--output", b}}, {{"--input", b}}),
                       doctest::Contains("destroy the input"), InputError);
  CHECK_NOTHROW(validate::require_distinct({{"--output", b}, {"--dump-ir", ""}}, {{"--input", a}}));
  fs::remove_all(dir);
}

TEST_CASE("finite values, ranges and angles") {
  const std::vector<float> v = {1, 2, NAN, 4, 5, 6};
  CHECK_THROWS_WITH_AS(validate::require_finite(v.data(), {2, 3}, "img"), doctest::Contains("at [0, 2]"), InputError);
  CHECK_THROWS_WITH_AS(validate::require_in_range("--sigma", NAN, 0, 1), "--sigma must be in [0, 1], got nan",
                       InputError);
  CHECK_NOTHROW(validate::require_in_range("--size", 64, 8, 65536));
  CHECK_THROWS_WITH_AS(validate::check_angles_deg({0, 1e302}, "", "'/exchange/theta'"), doctest::Contains("720"),
                       InputError);
  CHECK_THROWS_AS(validate::check_angles_deg({0, INFINITY}, "deg", "theta"), InputError);
  CHECK(validate::check_angles_deg({0, 1.5, 3.1}, "", "theta").find("radians") != std::string::npos);
  CHECK(validate::check_angles_deg({0, 1.5, 3.1}, "deg", "theta").find("radians") != std::string::npos);
  CHECK_THROWS_WITH_AS(validate::check_angles_deg({0, 1.5, 3.1}, "rad", "theta"), doctest::Contains("degrees"),
                       InputError);
  CHECK_THROWS_AS(validate::check_angles_deg({0, 90}, "radians", "theta"), InputError);
  CHECK(validate::check_angles_deg({0, 60, 120}, "", "theta").empty());
}

TEST_CASE("error_line: one line, long values cut") {
  CHECK(error_line("short") == "short");
  CHECK(error_line("a\nb\n") == "a; b");
  const std::string cut = error_line("file " + std::string(5000, 'y') + " is bad");
  CHECK(cut.size() < 300);
  CHECK(cut.find("(5000 characters) is bad") != std::string::npos);
  CHECK(error_line(std::string(3000, 'a') + " " + std::string(3000, 'b')).size() < 2100);
  CHECK(error_line(cut) == cut);  // a second pass (rank 0 prints what collectively cut) keeps it
  // LibTorch's backtrace after its message is left out
  CHECK(error_line("rank 0: CUDA out of memory. Tried to allocate 6.25 GiB. Exception raised from malloc at "
                   "CUDACachingAllocator.cpp:1574 (most recent call first):\nframe #0: c10::Error::Error") ==
        "rank 0: CUDA out of memory. Tried to allocate 6.25 GiB.");
  CHECK(clip_value("abc", 2) == "ab... (3 characters)");
  CHECK(run_id().size() == 16);
  CHECK(run_id().find_first_not_of("0123456789abcdef") == std::string::npos);
}
