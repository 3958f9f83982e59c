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
                    doctest::Contains("'/exchange/data' must be [angles, detector] (or a volume's [angles, slices, detector]), got 1 dimensions"));
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

TEST_CASE("projection volumes: flat- and dark-field normalisation slab by slab, and damaged files refused") {
  auto dir = pnp::test::scratch_dir("io_projvol");
  const int64_t K = 3, Z = 4, D = 600;
  // counts = dark + (flat - dark) * exp(-p) with p known per (angle, slice, bin)
  auto p_true = [](int64_t k, int64_t z, int64_t d) { return 0.01 * double(k + 1) + 0.2 * double(z) + 1e-3 * double(d % 50); };
  auto flat = [](int64_t f, int64_t z, int64_t d) { return 1000.0 + 10.0 * double(f) + double(z) + 0.1 * double(d); };
  auto darkv = [](int64_t z, int64_t d) { return 50.0 + 0.5 * double(z) + 0.01 * double(d); };
  auto write_volume = [&](const fs::path& path, bool dead_many) {
    std::vector<float> data, white, dark, theta{0.f, 60.f, 120.f};
    for (int64_t k = 0; k < K; ++k)
      for (int64_t z = 0; z < Z; ++z)
        for (int64_t d = 0; d < D; ++d) {
          const double fm = (flat(0, z, d) + flat(1, z, d)) / 2;
          data.push_back(float(darkv(z, d) + (fm - darkv(z, d)) * std::exp(-p_true(k, z, d))));
        }
    for (int64_t f = 0; f < 2; ++f)
      for (int64_t z = 0; z < Z; ++z)
        for (int64_t d = 0; d < D; ++d) white.push_back(float(flat(f, z, d)));
    for (int64_t z = 0; z < Z; ++z)
      for (int64_t d = 0; d < D; ++d) dark.push_back(float(darkv(z, d)));
    // one dead bin (slice 2, bin 7: flat = dark) in every file; with dead_many, slice 1 is dead
    for (int64_t f = 0; f < 2; ++f) white[size_t((f * Z + 2) * D + 7)] = dark[size_t(2 * D + 7)];
    if (dead_many)
      for (int64_t f = 0; f < 2; ++f)
        for (int64_t d = 0; d < D; ++d) white[size_t((f * Z + 1) * D + d)] = 0.f;
    H5File h = H5File::create(path);
    write(h, "/exchange/data", data.data(), {K, Z, D}, "counts", "projections");
    write(h, "/exchange/data_white", white.data(), {2, Z, D}, "counts", "flat fields");
    write(h, "/exchange/data_dark", dark.data(), {1, Z, D}, "counts", "dark fields");
    write(h, "/exchange/theta", theta.data(), {K}, "deg", "angles");
  };
  const fs::path good = dir / "vol.h5";
  write_volume(good, false);
  const VolumeShapes sh = read_volume_shapes(good);
  CHECK(sh.angles() == K);
  CHECK(sh.slices() == Z);
  CHECK(sh.detector() == D);
  CHECK(sh.has_theta);
  const SlabSinograms s = read_volume_slab(good, {}, sh, 1, 3);
  CHECK(s.sinograms.shape == std::vector<int64_t>{2, K, D});
  CHECK(s.dead_bins == 1);
  CHECK(s.clipped == 0);
  double worst = 0;
  for (int64_t z = 0; z < 2; ++z)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t d = 0; d < D; ++d) {
        const double got = s.sinograms.data[size_t((z * K + k) * D + d)];
        const double want = (z + 1 == 2 && d == 7) ? 0.0 : p_true(k, z + 1, d);
        worst = std::max(worst, std::abs(got - want));
      }
  CHECK(worst < 2e-4);  // float32 counts of about 1000: 1e-7 relative, over exp(-p) >= 0.3

  // Line integrals already: returned as stored, slice-major.
  const fs::path plain = dir / "plain.h5";
  {
    std::vector<float> data;
    for (int64_t k = 0; k < K; ++k)
      for (int64_t z = 0; z < Z; ++z)
        for (int64_t d = 0; d < 5; ++d) data.push_back(float(k * 100 + z * 10 + d));
    H5File h = H5File::create(plain);
    write(h, "/exchange/data", data.data(), {K, Z, 5}, "1", "line integrals");
  }
  const VolumeShapes ps = read_volume_shapes(plain);
  const SlabSinograms q = read_volume_slab(plain, {}, ps, 2, 4);
  CHECK(q.sinograms.shape == std::vector<int64_t>{2, K, 5});
  CHECK(q.sinograms.data[size_t((1 * K + 2) * 5 + 4)] == 234.f);  // slice 3, angle 2, bin 4

  // Damaged or inconsistent files: one clear error each, naming the file and the dataset.
  const fs::path dead = dir / "dead.h5";
  write_volume(dead, true);
  CHECK_NOTHROW(read_volume_slab(dead, {}, read_volume_shapes(dead), 2, 4));
  CHECK_THROWS_WITH_AS(read_volume_slab(dead, {}, read_volume_shapes(dead), 0, 2),
                       doctest::Contains("have a flat field at or below the dark field (the first: slice 1, bin 0)"),
                       pnp::InputError);
  CHECK_THROWS_WITH_AS(read_volume_slab(good, {}, sh, 3, 5), doctest::Contains("lie outside the volume's 4"),
                       pnp::InputError);
  CHECK_THROWS_WITH_AS(read_volume_shapes(dir / "none.h5"), doctest::Contains("none.h5"), pnp::InputError);
  auto broken = [&](const std::string& name, auto&& fill) {
    const fs::path p = dir / (name + ".h5");
    {
      H5File h = H5File::create(p);
      fill(h);
    }
    return p;
  };
  std::vector<float> zeros(size_t(2 * Z * D), 1.f);
  const fs::path flat2d = broken("flat2d", [&](H5File& h) { write(h, "/exchange/data", zeros.data(), {2 * Z, D}, "1", "2D"); });
  CHECK_THROWS_WITH_AS(read_volume_shapes(flat2d), doctest::Contains("must be [angles, slices, detector], got 2"),
                       pnp::InputError);
  const fs::path wrong_white = broken("wrong_white", [&](H5File& h) {
    write(h, "/exchange/data", zeros.data(), {2, Z, D}, "1", "data");
    write(h, "/exchange/data_white", zeros.data(), {1, Z - 1, D}, "1", "flats");
  });
  CHECK_THROWS_WITH_AS(read_volume_shapes(wrong_white), doctest::Contains("'/exchange/data_white' has shape [1, 3, 600]"),
                       pnp::InputError);
  const fs::path dark_only = broken("dark_only", [&](H5File& h) {
    write(h, "/exchange/data", zeros.data(), {2, Z, D}, "1", "data");
    write(h, "/exchange/data_dark", zeros.data(), {1, Z, D}, "1", "darks");
  });
  CHECK_THROWS_WITH_AS(read_volume_shapes(dark_only), doctest::Contains("dark fields need flat fields"), pnp::InputError);
  std::vector<float> nan_data = zeros;
  nan_data[size_t(1 * Z * D + 2 * D + 3)] = std::nanf("");
  const fs::path has_nan = broken("nan", [&](H5File& h) { write(h, "/exchange/data", nan_data.data(), {2, Z, D}, "1", "data"); });
  CHECK_NOTHROW(read_volume_slab(has_nan, {}, read_volume_shapes(has_nan), 0, 2));  // the NaN is in slice 2
  CHECK_THROWS_WITH_AS(read_volume_slab(has_nan, {}, read_volume_shapes(has_nan), 2, 3), doctest::Contains(
                           "'/exchange/data' (slices [2, 3) as [angle, slice - 2, bin]) holds a non-finite value (nan) at [1, 0, 3]"),
                       pnp::InputError);
}
