// The HDF5 probe (include/pnp/io.hpp, probe_hdf5): every input file is first read whole in a
// separate process, so that a damaged file that crashes or hangs the HDF5 library there (the
// fuzzer found such files: out-of-bounds reads in libhdf5 1.10's global- and local-heap code on
// byte-corrupted metadata) becomes an input error here instead of a dead or stuck rank.
//
// The probe process is `pnp_h5probe` (apps/pnp_h5probe.cpp: HDF5 and this file only, so it
// starts in milliseconds), found beside the running program and started with posix_spawn (no
// fork of an MPI rank: spawn is safe with threads and registered memory). It visits every
// object of each file and reads every attribute and every dataset (datasets larger than 256
// MiB in their first 1 MiB only: the real readers check declared sizes before they allocate).
#include <fcntl.h>
#include <hdf5.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "pnp/io.hpp"

extern char** environ;

namespace pnp::io {
namespace {

// HDF5 1.10 (Debian 12) and 1.12+ (Ubuntu 24.04 has 1.10 too; h5py's wheels 1.14) name the
// object visitor and the variable-length reclaim differently.
#if H5_VERSION_GE(1, 12, 0)
using ObjectInfo = H5O_info2_t;
herr_t reclaim(hid_t type, hid_t space, void* buf) { return H5Treclaim(type, space, H5P_DEFAULT, buf); }
herr_t visit_all(hid_t f, H5O_iterate2_t op, void* data) {
  return H5Ovisit3(f, H5_INDEX_NAME, H5_ITER_NATIVE, op, data, H5O_INFO_BASIC);
}
#else
using ObjectInfo = H5O_info_t;
herr_t reclaim(hid_t type, hid_t space, void* buf) { return H5Dvlen_reclaim(type, space, H5P_DEFAULT, buf); }
herr_t visit_all(hid_t f, H5O_iterate_t op, void* data) {
  return H5Ovisit2(f, H5_INDEX_NAME, H5_ITER_NATIVE, op, data, H5O_INFO_BASIC);
}
#endif
bool has_variable_length(hid_t t) { return H5Tdetect_class(t, H5T_VLEN) > 0 || H5Tis_variable_str(t) > 0; }

// The type a probe read converts to: a number's own file type (the bytes as stored: no
// conversion, which is not what can crash, and HDF5 1.10 converts 16-bit floats one element
// at a time, 0.3 s for drunet_ct's 3.8 M scales), the native type otherwise (variable-length
// data must be read as native to be reclaimed).
hid_t memory_type(hid_t ftype) {
  const H5T_class_t c = H5Tget_class(ftype);
  return c == H5T_INTEGER || c == H5T_FLOAT ? H5Tcopy(ftype) : H5Tget_native_type(ftype, H5T_DIR_ASCEND);
}

constexpr hsize_t kFullReadBytes = hsize_t(1) << 28;  // datasets up to 256 MiB are read whole
constexpr hsize_t kPartialBytes = hsize_t(1) << 20;   // of larger ones, the first 1 MiB

// Reads one attribute in its own type (variable-length data included, then reclaimed).
herr_t read_attribute(hid_t obj, const char* name, const H5A_info_t*, void*) {
  const hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
  if (a < 0) return -1;
  herr_t rc = -1;
  const hid_t ftype = H5Aget_type(a), space = H5Aget_space(a);
  if (ftype >= 0 && space >= 0) {
    const hid_t mtype = memory_type(ftype);
    const hssize_t n = H5Sget_simple_extent_npoints(space);
    const size_t size = mtype >= 0 ? H5Tget_size(mtype) : 0;
    if (mtype >= 0 && n >= 0 && size > 0 && static_cast<double>(n) * size < double(kFullReadBytes)) {
      std::vector<unsigned char> buf(static_cast<size_t>(n) * size + 1);
      rc = H5Aread(a, mtype, buf.data());
      if (rc >= 0 && has_variable_length(mtype)) reclaim(mtype, space, buf.data());
    }
    if (mtype >= 0) H5Tclose(mtype);
  }
  if (ftype >= 0) H5Tclose(ftype);
  if (space >= 0) H5Sclose(space);
  H5Aclose(a);
  return rc < 0 ? -1 : 0;
}

// Reads a dataset: whole up to the cap, else the leading elements that fit in 1 MiB.
bool read_dataset(hid_t ds) {
  const hid_t ftype = H5Dget_type(ds), space = H5Dget_space(ds);
  bool ok = ftype >= 0 && space >= 0;
  hid_t mtype = ok ? memory_type(ftype) : -1;
  ok = ok && mtype >= 0;
  if (ok) {
    const size_t size = H5Tget_size(mtype);
    const hssize_t n = H5Sget_simple_extent_npoints(space);
    const int rank = H5Sget_simple_extent_ndims(space);
    ok = size > 0 && n >= 0 && rank >= 0;
    if (ok && n > 0) {
      hid_t mspace = H5S_ALL, fspace = H5S_ALL;
      hsize_t count = static_cast<hsize_t>(n);
      if (static_cast<double>(n) * size > double(kFullReadBytes) && rank > 0) {
        // The first elements in storage order: a hyperslab of whole rows of the last axis.
        std::vector<hsize_t> dims(rank), start(rank, 0), cnt(rank, 1);
        H5Sget_simple_extent_dims(space, dims.data(), nullptr);
        cnt[rank - 1] = std::max<hsize_t>(1, std::min<hsize_t>(dims[rank - 1], kPartialBytes / size));
        count = cnt[rank - 1];
        H5Sselect_hyperslab(space, H5S_SELECT_SET, start.data(), nullptr, cnt.data(), nullptr);
        fspace = space;
        mspace = H5Screate_simple(1, &count, nullptr);
      }
      std::vector<unsigned char> buf(count * size);
      ok = H5Dread(ds, mtype, mspace, fspace, H5P_DEFAULT, buf.data()) >= 0;
      if (ok && has_variable_length(mtype)) reclaim(mtype, mspace == H5S_ALL ? space : mspace, buf.data());
      if (mspace != H5S_ALL) H5Sclose(mspace);
    }
  }
  if (mtype >= 0) H5Tclose(mtype);
  if (ftype >= 0) H5Tclose(ftype);
  if (space >= 0) H5Sclose(space);
  return ok;
}

herr_t visit(hid_t root, const char* name, const ObjectInfo* info, void* bad) {
  const hid_t o = H5Oopen(root, name, H5P_DEFAULT);
  if (o < 0) return 0;  // a dangling link: the readers say which dataset is missing
  hsize_t idx = 0;
  H5Aiterate2(o, H5_INDEX_NAME, H5_ITER_NATIVE, &idx, read_attribute, nullptr);
  if (info->type == H5O_TYPE_DATASET && !read_dataset(o)) *static_cast<std::string*>(bad) = name;
  H5Oclose(o);
  return 0;
}

}  // namespace

std::string whole_file_problem(const std::filesystem::path& path) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  std::string name = "'";  // built by append (gcc 12's -Wrestrict misfires on "'" + s + "'")
  name.append(path.string()).append("'");
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) return name.append(" is not a readable HDF5 file");
  std::string bad;
  const herr_t rc = visit_all(f, visit, &bad);
  H5Fclose(f);
  if (rc < 0) return name.append(" is damaged: its objects cannot be listed");
  if (!bad.empty()) return name.append(" is damaged: dataset '/").append(bad).append("' cannot be read");
  return "";
}

namespace {

std::string signal_name(int sig) {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGKILL: return "SIGKILL, perhaps out of memory";
    default: return "signal " + std::to_string(sig);
  }
}

}  // namespace

void probe_hdf5(const std::vector<std::filesystem::path>& given, double timeout_s) {
  std::vector<std::filesystem::path> files;  // those that exist: the readers explain the others
  for (const auto& f : given)
    if (!f.empty() && input_file_problem(f.string()).empty()) files.push_back(f);
  if (files.empty()) return;
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::filesystem::path probe = exe.parent_path() / "pnp_h5probe";
  if (ec || !std::filesystem::exists(probe))
    throw Error("probe_hdf5: " + probe.string() + " not found (pnp_h5probe is built and installed beside every pnp program)");
  std::vector<std::string> args{probe.string()};
  for (const auto& f : files) args.push_back(f.string());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int err[2];
  if (pipe2(err, O_CLOEXEC) != 0) throw Error("probe_hdf5: pipe failed");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, err[1], STDERR_FILENO);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, args[0].c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(err[1]);
  if (rc != 0) {
    close(err[0]);
    throw Error("probe_hdf5: could not start the probe process: " + std::string(std::strerror(rc)));
  }
  // Collect the child's stderr until it exits or the time is up.
  std::string msg;
  int status = 0;
  bool done = false, timed_out = false;
  const auto t0 = std::chrono::steady_clock::now();
  while (!done) {
    pollfd p{err[0], POLLIN, 0};
    if (poll(&p, 1, 50) > 0) {
      char buf[512];
      const ssize_t n = ::read(err[0], buf, sizeof buf);
      if (n > 0 && msg.size() < 4096) msg.append(buf, static_cast<size_t>(n));
    }
    done = waitpid(pid, &status, WNOHANG) == pid;
    if (!done && std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > timeout_s) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      done = timed_out = true;
    }
  }
  for (char buf[512]; msg.size() < 4096;) {  // what the child wrote just before it exited
    const ssize_t n = ::read(err[0], buf, sizeof buf);
    if (n <= 0) break;
    msg.append(buf, static_cast<size_t>(n));
  }
  close(err[0]);
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
  std::string names;
  for (const auto& f : files) names += (names.empty() ? "'" : ", '") + f.string() + "'";
  if (timed_out)
    throw InputError("reading " + names + " did not finish within " + std::to_string(static_cast<int>(timeout_s)) +
                     " s in a probe process: a damaged HDF5 file (the HDF5 library loops on it)");
  if (WIFSIGNALED(status))
    throw InputError("reading " + names + " crashed the HDF5 library in a probe process (" +
                     signal_name(WTERMSIG(status)) + "): a damaged HDF5 file");
  if (WIFEXITED(status) && WEXITSTATUS(status) == 2) throw InputError(msg.empty() ? "a damaged HDF5 file" : msg);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw Error("probe_hdf5: the probe process of " + names + " exited with " + std::to_string(WEXITSTATUS(status)) +
                (msg.empty() ? "" : ": " + msg));
}

}  // namespace pnp::io
