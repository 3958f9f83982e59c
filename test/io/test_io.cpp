#include "pnp_test.hpp"

#include <bit>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>

#include "pnp/io.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using namespace pnp::io;

TEST_CASE("round trip of every dataset type with units and description") {
  auto dir = pnp::test::scratch_dir("io");
  auto path = dir / "rt.h5";
  std::vector<float> img(6 * 4);
  for (size_t i = 0; i < img.size(); ++i) img[i] = 0.25f * float(i) - 1.0f;
  std::vector<double> t(3 * 2);
  for (size_t i = 0; i < t.size(); ++i) t[i] = std::sqrt(double(i) + 0.5);
  std::vector<int64_t> boxes = {0, 3, 0, 4, 3, 6, 0, 4};
  {
    H5File f = H5File::create(path);
    write(f, "/reconstruction", img.data(), {6, 4}, "attenuation per pixel", "final image");
    write(f, "/timings/forward_projection", t.data(), {3, 2}, "s", "phase time");
    write_scalar(f, "/timings/stable_iteration", 0.125, "s", "stable");
    write(f, "/decomposition/boxes", boxes.data(), {2, 4}, "px", "tiles");
    write_scalar<int64_t>(f, "/decomposition/halo", 17, "px", "halo");
    write_strings(f, "/results/architecture", {"dncnn", "drunet", "ünet"}, "names");
    pnp::Provenance p = pnp::basic_provenance("pnp_test");
    p.torch_version = "2.11.0";
    write_provenance(f, p);
    write_attr(f, "/", "ranks", int64_t{2});
    write_attr(f, "/", "config", std::string("[problem]\nsize = 6\n"));
    write_attr(f, "/timings", "note", 1.5);
  }
  H5File f = H5File::open(path);
  auto r = read<float>(f, "/reconstruction");
  CHECK(r.shape == std::vector<int64_t>{6, 4});
  CHECK(r.data == img);
  auto rt = read<double>(f, "timings/forward_projection");
  CHECK(rt.shape == std::vector<int64_t>{3, 2});
  CHECK(rt.data == t);
  auto s = read<double>(f, "/timings/stable_iteration");
  CHECK(s.shape.empty());
  CHECK(s.data == std::vector<double>{0.125});
  CHECK(read<int64_t>(f, "/decomposition/boxes").data == boxes);
  CHECK(read<int64_t>(f, "/decomposition/halo").data[0] == 17);
  CHECK(read_strings(f, "/results/architecture") == std::vector<std::string>{"dncnn", "drunet", "ünet"});
  for (const auto& d : list_datasets(f)) {
    CAPTURE(d);
    CHECK(has_attr(f, d, "units"));
    CHECK(has_attr(f, d, "description"));
  }
  CHECK(list_datasets(f).size() == 6);
  CHECK(list_datasets(f, "/timings") ==
        std::vector<std::string>{"/timings/forward_projection", "/timings/stable_iteration"});
  CHECK(read_attr_string(f, "/reconstruction", "units") == "attenuation per pixel");
  CHECK(read_attr_string(f, "/", "program") == "pnp_test");
  CHECK(read_attr_string(f, "/", "torch_version") == "2.11.0");
  CHECK(read_attr_string(f, "/", "cuda_version") == "none");
  CHECK(read_attr_string(f, "/", "git_commit").size() >= 7);
  CHECK(read_attr_string(f, "/", "date").size() == 20);
  CHECK(read_attr_int(f, "/", "ranks") == 2);
  CHECK(read_attr_string(f, "/", "config") == "[problem]\nsize = 6\n");
  CHECK(read_attr_double(f, "/timings", "note") == 1.5);
  CHECK(exists(f, "/timings"));
  CHECK_FALSE(exists(f, "/nope/deeper"));
  CHECK_THROWS_AS(read<float>(f, "/missing"), pnp::InputError);
}

TEST_CASE("float16 datasets: every binary16 value reads back exactly") {
  auto dir = pnp::test::scratch_dir("io");
  // every finite binary16 value, both infinities and a NaN (as floats: exact)
  std::vector<float> all;
  for (uint32_t b = 0; b < 65536; ++b) {
    const _Float16 h = std::bit_cast<_Float16>(static_cast<uint16_t>(b));
    if (((b >> 10) & 0x1f) != 0x1f || (b & 0x3ff) == 0 || b == 0x7e00) all.push_back(static_cast<float>(h));
  }
  REQUIRE(all.size() == 63488 + 3);
  const auto path = dir / "half.h5";
  {
    H5File f = H5File::create(path);
    write_float16(f, "/h", all.data(), {static_cast<int64_t>(all.size())}, "1", "every binary16 value");
  }
  H5File f = H5File::open(path);
  const auto back = read<float>(f, "/h");
  REQUIRE(back.data.size() == all.size());
  size_t same = 0;
  for (size_t i = 0; i < all.size(); ++i)
    same += std::bit_cast<uint32_t>(back.data[i]) == std::bit_cast<uint32_t>(all[i]) ||
            (std::isnan(back.data[i]) && std::isnan(all[i]));
  CHECK(same == all.size());
  // by value: the smallest subnormal, the largest finite, infinity, the negative zero
  CHECK(back.data[1] == 0x1p-24f);
  CHECK(back.data[0x7bff] == 65504.0f);
  CHECK(std::isinf(back.data[0x7c00]));
  CHECK((back.data[31746] == 0.0f && std::signbit(back.data[31746])));
}

TEST_CASE("reading a DXchange file written by h5py") {
  auto dir = pnp::test::scratch_dir("io_dx");
  auto path = dir / "dx.h5";
  std::string cmd = "python3 " + (pnp::test::source_dir() / "test/io/make_dxchange.py").string() + " " + path.string();
  REQUIRE(std::system(cmd.c_str()) == 0);
  Sinogram s = read_dxchange(path);
  CHECK(s.data.shape == std::vector<int64_t>{12, 17});
  for (float v : s.data.data) CHECK((v >= 0.5f && v < 1.5f));
  REQUIRE(s.theta_deg.size() == 12);
  CHECK(s.theta_deg[3] == doctest::Approx(45.0));
  REQUIRE(s.ground_truth.has_value());
  CHECK(s.ground_truth->shape == std::vector<int64_t>{12, 12});
  CHECK(s.ground_truth->data[143] == 143.0f);  // converted from float64

  DxchangePaths custom{"/custom/sino", "/custom/theta", ""};
  Sinogram c = read_dxchange(path, custom);
  CHECK(c.data.shape == std::vector<int64_t>{3, 5});
  CHECK(c.data.data[0] == 2.5f);
  CHECK(c.theta_deg.empty());
  CHECK_FALSE(c.ground_truth.has_value());
}

TEST_CASE("DXchange errors name the file and dataset") {
  auto dir = pnp::test::scratch_dir("io_err");
  CHECK_THROWS_WITH_AS(read_dxchange(dir / "none.h5"),
                       ("reading sinogram " + (dir / "none.h5").string() + ": file not found: " +
                        (dir / "none.h5").string()).c_str(),
                       pnp::InputError);
  { std::ofstream(dir / "text.h5") << "not hdf5"; }
  CHECK_THROWS_AS(read_dxchange(dir / "text.h5"), pnp::InputError);
  {
    H5File f = H5File::create(dir / "bad.h5");
    std::vector<float> d(10, 1.0f);
    write(f, "/exchange/data", d.data(), {10}, "1", "1-D: wrong");
  }
  CHECK_THROWS_WITH(read_dxchange(dir / "bad.h5"),
                    doctest::Contains("'/exchange/data' must be [angles, detector], got 1 dimensions"));
  {
    H5File f = H5File::create(dir / "nodata.h5");
    std::vector<float> d(4, 1.0f);
    write(f, "/other", d.data(), {2, 2}, "1", "x");
  }
  CHECK_THROWS_WITH(read_dxchange(dir / "nodata.h5"), doctest::Contains("dataset '/exchange/data' not found in"));
}

TEST_CASE("an attribute that declares more than one value is refused, not read past its variable") {
  auto dir = pnp::test::scratch_dir("io_attr");
  {
    H5File f = H5File::create(dir / "a.h5");
    const hsize_t n = 64;
    hid_t space = H5Screate_simple(1, &n, nullptr);
    std::vector<double> v(n, 3.0);
    hid_t a = H5Acreate2(f.id(), "step", H5T_NATIVE_DOUBLE, space, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, H5T_NATIVE_DOUBLE, v.data());
    H5Aclose(a);
    hid_t st = H5Tcopy(H5T_C_S1);
    H5Tset_size(st, 8);
    std::vector<char> text(8 * n, 'x');
    a = H5Acreate2(f.id(), "name", st, space, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, st, text.data());
    H5Aclose(a);
    H5Tclose(st);
    H5Sclose(space);
  }
  H5File f = H5File::open(dir / "a.h5");
  CHECK_THROWS_WITH_AS(read_attr_double(f, "/", "step"), doctest::Contains("holds 64 values, expected one"),
                       pnp::InputError);
  CHECK_THROWS_WITH_AS(read_attr_string(f, "/", "name"), doctest::Contains("holds 64 values, expected one"),
                       pnp::InputError);
}

TEST_CASE("the probe: whole_file_problem reads every object; probe_hdf5 skips missing files") {
  auto dir = pnp::test::scratch_dir("io_probe");
  {
    H5File f = H5File::create(dir / "ok.h5");
    std::vector<float> d(12, 1.0f);
    write(f, "/g/x", d.data(), {3, 4}, "1", "x");
    write_attr(f, "/", "program", std::string("pnp_test"));
  }
  CHECK(whole_file_problem(dir / "ok.h5") == "");
  { std::ofstream(dir / "text.h5") << "not hdf5"; }
  CHECK(whole_file_problem(dir / "text.h5").find("is not a readable HDF5 file") != std::string::npos);
  // Missing files are left to their readers; the probe program itself is beside the test binary.
  CHECK_NOTHROW(probe_hdf5({dir / "missing.h5"}));
  CHECK_NOTHROW(probe_hdf5({dir / "ok.h5"}, 30));
  CHECK_THROWS_WITH_AS(probe_hdf5({dir / "ok.h5", dir / "text.h5"}, 30), doctest::Contains("text.h5"),
                       pnp::InputError);
}

TEST_CASE("atomic output: nothing under the final name until commit, no overwrite without force") {
  auto dir = pnp::test::scratch_dir("io_atomic");
  auto final_path = dir / "out.h5";
  {
    AtomicOutput out(final_path, false);
    double v = 1.0;
    write(out.file(), "/x", &v, {1}, "1", "x");
    CHECK_FALSE(fs::exists(final_path));
    // destroyed without commit: simulates a crash
  }
  CHECK_FALSE(fs::exists(final_path));
  for (auto& e : fs::directory_iterator(dir)) CHECK(e.path().string().find(".tmp.") == std::string::npos);
  {
    AtomicOutput out(final_path, false);
    double v = 2.0;
    write(out.file(), "/x", &v, {1}, "1", "x");
    out.commit();
  }
  CHECK(fs::exists(final_path));
  CHECK_THROWS_WITH_AS(AtomicOutput(final_path, false),
                       ("output file " + final_path.string() + " exists; pass --force to overwrite it").c_str(),
                       pnp::InputError);
  {
    AtomicOutput out(final_path, true);
    double v = 3.0;
    write(out.file(), "/x", &v, {1}, "1", "x");
    out.commit();
  }
  H5File f = H5File::open(final_path);
  CHECK(read<double>(f, "/x").data[0] == 3.0);
  CHECK_THROWS_AS(check_output_path(dir / "no_such_dir" / "o.h5", false), pnp::InputError);
}

TEST_CASE("volumes: a chunked, compressed dataset written in slabs reads back in any hyperslab") {
  auto dir = pnp::test::scratch_dir("io_volume");
  auto path = dir / "vol.h5";
  const int64_t Z = 5, H = 12, W = 9;
  auto value = [](int64_t z, int64_t r, int64_t c) { return float(z) * 1000.0f + float(r) * 10.0f + 0.5f * float(c); };
  {
    H5File f = H5File::create(path);
    create_chunked(f, "/volume", {Z, H, W}, {1, H, W}, 4, "attenuation per pixel", "a test volume");
    // slabs of two slices, written out of order; slice 4 left unwritten
    for (int64_t z0 : {2, 0}) {
      std::vector<float> slab;
      for (int64_t z = z0; z < z0 + 2; ++z)
        for (int64_t r = 0; r < H; ++r)
          for (int64_t c = 0; c < W; ++c) slab.push_back(value(z, r, c));
      write_hyperslab(f, "/volume", {z0, 0, 0}, {2, H, W}, slab.data());
    }
    CHECK_THROWS_WITH_AS(write_hyperslab(f, "/volume", {4, 0, 0}, {2, H, W}, std::vector<float>(2 * H * W).data()),
                         doctest::Contains("lies outside '/volume'"), pnp::InputError);
  }
  H5File f = H5File::open(path);
  const ChunkLayout l = chunk_layout(f, "/volume");
  CHECK(l.chunk == std::vector<int64_t>{1, H, W});
  CHECK(l.deflate);
  CHECK(read_attr_string(f, "/volume", "units") == "attenuation per pixel");
  // a column through every slice, and one inner box
  const Array<float> col = read_hyperslab<float>(f, "/volume", {0, 7, 3}, {Z, 1, 1});
  CHECK(col.shape == std::vector<int64_t>{Z, 1, 1});
  for (int64_t z = 0; z < 4; ++z) CHECK(col.data[size_t(z)] == value(z, 7, 3));
  CHECK(std::isnan(col.data[4]));  // never written: NaN, not a plausible zero
  const Array<double> box = read_hyperslab<double>(f, "/volume", {1, 2, 4}, {2, 3, 5});
  for (int64_t z = 0; z < 2; ++z)
    for (int64_t r = 0; r < 3; ++r)
      for (int64_t c = 0; c < 5; ++c) CHECK(box.data[size_t((z * 3 + r) * 5 + c)] == value(1 + z, 2 + r, 4 + c));
  CHECK_THROWS_WITH_AS(read_hyperslab<float>(f, "/volume", {0, 0}, {1, 1}), doctest::Contains("has 3 dimensions, not 2"),
                       pnp::InputError);
  CHECK_THROWS_WITH_AS(read_hyperslab<float>(f, "/volume", {0, 10, 0}, {1, 3, W}),
                       doctest::Contains("the range [0:1, 10:13, 0:9] lies outside '/volume'"), pnp::InputError);
  CHECK_THROWS_WITH_AS(read_hyperslab<float>(f, "/nothing", {0}, {1}), doctest::Contains("not found"), pnp::InputError);
}
