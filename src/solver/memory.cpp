// Device memory estimate of one rank and the denoiser patches for denoiser.memory_limit_gb
// (include/pnp/solver.hpp, plan_memory).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <utility>

#include "pnp/device.hpp"
#include "pnp/io.hpp"
#include "pnp/metrics.hpp"
#include "pnp/nn/native.hpp"
#include "pnp/nn/patch.hpp"
#include "pnp/roofline.hpp"
#include "pnp/solver.hpp"

namespace pnp {

namespace {

// The native executor's convolution workspaces and allocator rounding, as a fraction of its
// activations (measured on the GPU: docs/performance.md#memory-budget).
constexpr double kNativeWorkspace = 0.10;
// The eager executor's on the GPU, in multiples of its largest activation: cuDNN's workspaces
// (H200, docs/performance.md#memory-budget).
constexpr double kEagerWorkspaceCuda = 2.0;
// ... and held to the plan in float32 without TF32 (holds_to_plan): the 6 x 512² volume's eager
// run used none of the 2.0 (its peak 0.685 of such an estimate; H100, 2026-12-06).
constexpr double kEagerWorkspaceCudaHeld = 0.25;
// The native executor's held (holds_to_plan), in multiples of its largest activation: its
// autotuning warm-up, on the first call, times rivals that write outputs of their own, and cuDNN's
// fallbacks take what the hold leaves. Held at the plan without it, 1024² and 6 x 512² ran out of
// memory in the warm-up; with 1, 2 and 3 every run ran, the peaks at 0.75-0.98 of their estimates,
// cuDNN's choices filling what they found (H100, 2026-12-06, docs/performance.md#memory-budget).
constexpr double kNativeWarmupHeld = 2.0;
constexpr double kSmallBytes = 256.0 * 1024;
// On the CPU the convolutions' buffers depend on the instruction set oneDNN picks: a margin of the
// stages' sum (the DRUNet, DnCNN and UNet cases of recon_memory_plan sit at 0.99-1.00 of it).
constexpr double kCpuMargin = 0.03;

int64_t round_up(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

// One axis's tiling: the patch size handed to patch_ranges (0 = the whole axis), its ranges,
// the pixels they compute along the axis and their distinct extents.
struct AxisTiling {
  int64_t patch = 0;
  std::vector<nn::PatchRange> ranges;
  int64_t computed = 0;
  std::set<int64_t> extents;
};

AxisTiling tiling(int64_t size, int64_t patch, int64_t overlap, int64_t align) {
  AxisTiling t;
  t.ranges = nn::patch_ranges(size, patch, overlap, align);
  t.patch = t.ranges.size() > 1 ? patch : 0;
  for (const auto& r : t.ranges) t.computed += r.in1 - r.in0, t.extents.insert(r.in1 - r.in0);
  return t;
}

// Every distinct tiling of an axis, fewest patches first (for each count, the largest patch
// that gives it): the whole axis, then 2, 3, ... patches down to cores of one alignment unit.
std::vector<AxisTiling> axis_tilings(int64_t size, int64_t overlap, int64_t align) {
  std::vector<AxisTiling> out{tiling(size, 0, overlap, align)};
  const int64_t ov = round_up(overlap, align);
  for (int64_t n = 2; n <= size; ++n) {
    const int64_t core = round_up((size + n - 1) / n, align);
    const int64_t patch = core + 2 * ov;
    if (patch >= size) continue;  // still one call
    AxisTiling t = tiling(size, patch, overlap, align);
    if (t.ranges.size() > out.back().ranges.size()) out.push_back(std::move(t));
    if (core <= align) break;
  }
  return out;
}

// Bytes as GB rounded up to two significant digits ("40", "5.9", "0.00099").
std::string gb(double bytes) {
  const double g = bytes / 1e9;
  if (!(g > 0)) return "0";
  const int e = static_cast<int>(std::floor(std::log10(g))) - 1;
  const double step = std::pow(10.0, e);
  char b[32];
  std::snprintf(b, sizeof b, "%.*f", std::max(0, -e), std::ceil(g / step - 1e-9) * step);
  return b;
}

}  // namespace

std::string MemoryPlan::describe() const {
  std::string o = "about " + human_bytes(total()) + " (solver " + human_bytes(solver);
  if (quality > 0) o += ", metrics " + human_bytes(quality);
  o += ", weights " + human_bytes(weights) + ", denoiser activations " + human_bytes(activations) + ", workspace " +
       human_bytes(workspace);
  if (patching > 0) o += ", patching " + human_bytes(patching);
  if (other > 0) o += ", other stages +" + human_bytes(other);
  if (margin > 0) o += ", margin " + human_bytes(margin);
  o += ")";
  if (stream > 0)
    o += ", streamed: " + std::to_string(stream) + " slice(s) on the device at once (" + std::to_string(stream_groups) +
         " groups per iteration, the slab in host memory)";
  if (batches > 1 || batch > 1)
    o += ", " + std::to_string(batch) + " slice(s) per denoiser call (" + std::to_string(batches) + " call(s) per pass)";
  if (patched()) {
    char red[32];
    std::snprintf(red, sizeof red, "%.3f", redundancy);
    o += ", " + std::to_string(patches) + " patches of " + std::to_string(patch_rows) + " x " +
         std::to_string(patch_cols) + " px (overlap " + std::to_string(overlap) + ", " + std::to_string(patch_shapes) +
         " shape" + (patch_shapes > 1 ? "s" : "") + ", redundancy " + red + ")";
  } else {
    o += ", whole tile";
  }
  return o;
}

namespace {

// The estimate of one rank's tile for any tiling of its axes (walks cached per patch shape).
class Estimator {
 public:
  // streamed: ctx.slices are a group of a streamed slab, with its staging buffers.
  Estimator(const Config& cfg, const nn::Graph& g, const TilePlan& tile, const MemoryContext& ctx, bool streamed);
  // The estimate with the slab's slices denoised `batch` at a time (nearly equal calls).
  MemoryPlan operator()(const AxisTiling& tr, const AxisTiling& tc, int64_t batch = 1);
  int64_t slices() const { return slices_; }
  AxisTiling rows(int64_t patch) const { return tiling(ext_.rows(), patch, base_.overlap, align_); }
  AxisTiling cols(int64_t patch) const { return tiling(ext_.cols(), patch, base_.overlap, align_); }
  std::vector<AxisTiling> row_tilings() const { return axis_tilings(ext_.rows(), base_.overlap, align_); }
  std::vector<AxisTiling> col_tilings() const { return axis_tilings(ext_.cols(), base_.overlap, align_); }
  int64_t align() const { return align_; }
  int64_t overlap() const { return base_.overlap; }

 private:
  const roofline::ActivationMemory& walk(int64_t b, int64_t h, int64_t w);
  const nn::Graph& g_;
  Box ext_;
  int64_t channels_ = 1, eb_ = 4, align_ = 1, slices_ = 1, depth_ = 0;
  bool eager_ = true, cuda_ = true, fp8_ = false, fp8_native_ = false, held_ = false;
  double ext_px_ = 0, physics_ = 0, setup_ = 0, metrics_strips_ = 0;
  MemoryPlan base_;
  std::map<std::array<int64_t, 3>, roofline::ActivationMemory> walks_;
};

Estimator::Estimator(const Config& cfg, const nn::Graph& g, const TilePlan& tile, const MemoryContext& ctx, bool streamed)
    : g_(g), ext_(tile.ext), slices_(std::max<int64_t>(ctx.slices, 1)), depth_(ctx.depth), cuda_(ctx.cuda) {
  const auto& dc = cfg.denoiser;
  const Box& own = tile.own;
  channels_ = dc.channels;
  eb_ = at::elementSize(denoiser_dtype(dc));
  fp8_ = dc.precision == "fp8_emulated";
  fp8_native_ = dc.precision == "fp8";
  held_ = holds_to_plan(cfg, ctx.cuda);  // as Reconstruction holds
  // Inductor's buffer plan is its own: estimated as eager's.
  eager_ = denoiser_executor(cfg) != DenoiserExecutor::native || g.architecture == "identity";
  align_ = g.alignment();
  const double own_px = static_cast<double>(own.size()), sino = static_cast<double>(ctx.angles * ctx.detectors);
  ext_px_ = static_cast<double>(ext_.size());
  base_.overlap = dc.patch_overlap > 0 ? dc.patch_overlap : nn::receptive_radius(g);
  // x, gradient, truth, extended z; data, projection; and the small tensors (angles, scalars,
  // index maps, the allocator's rounding): kSmallBytes
  const double S = static_cast<double>(slices_);
  // (a 3D denoiser's extended z holds its z-halo's slices too)
  base_.solver = 4.0 * (S * (3 * own_px + 2 * sino) + static_cast<double>(std::max(depth_, slices_)) * ext_px_) + kSmallBytes;
  // a streamed group's staging: the next group's iterate and data coming in, the last one's
  // iterate going out (the slab itself is in host memory)
  if (streamed) base_.solver += 4.0 * S * (2 * own_px + sino);
  const int64_t r = metrics::SsimOptions{}.radius(), n = cfg.problem.size;
  const bool measured = cfg.solver.metrics_every > 0;  // the quality monitor's boxes exist regardless
  if (ctx.truth && !own.empty()) {
    const double rows = static_cast<double>(std::min(own.r1 + r, n) - std::max<int64_t>(own.r0 - r, 0));
    const double cols = static_cast<double>(std::min(own.c1 + r, n) - std::max<int64_t>(own.c0 - r, 0));
    base_.quality = 2 * 4.0 * S * rows * cols;
    if (measured) metrics_strips_ = metrics::strip_workspace_bytes(own.rows(), own.cols(), r);
  }
  // The stages besides the denoiser's: the projections stage the tile; the set-up (before the
  // loop's buffers) projects the truth in float64 and runs the power method (three float32
  // images, two float64 squares). On a GPU the forward projection stages one slice at a time:
  // its transpose, and an aligned copy only where a row of the tile is not whole 16-byte pieces
  // (physics.cpp, forward_into). Counted as two images, 16384² bf16 under 16 GB was estimated
  // 10.1 % above its peak on an H200 (docs/performance.md). On the CPU, two images as measured.
  const bool aligned = own.cols() % 4 == 0;  // float32 rows of whole 16-byte pieces
  physics_ = (cuda_ && aligned ? 1 : 2) * 4.0 * own_px;
  // (A volume's: the slab's truth and data, the float64 projection of one slice at a time.)
  setup_ = 4.0 * S * (own_px + sino) + std::max(8.0 * (2 * own_px + 2 * sino), 4.0 * (5 * own_px + sino) + 16.0 * own_px);
}

const roofline::ActivationMemory& Estimator::walk(int64_t b, int64_t h, int64_t w) {
  auto it = walks_.find({b, h, w});
  if (it == walks_.end()) {
    // the native executor runs its convolutions through ATen on the CPU, as eager does
    const auto style = eager_ || !cuda_ ? roofline::ExecutorStyle::eager : roofline::ExecutorStyle::native;
    // a 3D denoiser's batch is its depth: one call on the extended slab
    const std::vector<int64_t> shape = depth_ > 0 ? std::vector<int64_t>{1, channels_, b, h, w}
                                                  : std::vector<int64_t>{b, channels_, h, w};
    it = walks_.emplace(std::array<int64_t, 3>{b, h, w}, roofline::activation_memory(g_, shape, eb_, style)).first;
  }
  return it->second;
}

MemoryPlan Estimator::operator()(const AxisTiling& tr, const AxisTiling& tc, int64_t batch) {
  MemoryPlan m = base_;
  // the slab's calls: nearly equal batches, of at most two sizes
  m.batches = depth_ > 0 ? 1 : (slices_ + batch - 1) / batch;
  std::set<int64_t> batch_sizes;
  if (depth_ > 0)
    batch_sizes.insert(depth_);
  else
    for (const auto& [z0, z1] : split_range(slices_, static_cast<int>(m.batches))) batch_sizes.insert(z1 - z0);
  m.batch = *batch_sizes.rbegin();
  const double B = static_cast<double>(m.batch);
  m.patches = static_cast<int64_t>(tr.ranges.size() * tc.ranges.size());
  m.patch_rows = m.patched() ? (tr.patch ? *tr.extents.rbegin() : ext_.rows()) : 0;
  m.patch_cols = m.patched() ? (tc.patch ? *tc.extents.rbegin() : ext_.cols()) : 0;
  m.patch_shapes = static_cast<int>(tr.extents.size() * tc.extents.size());
  m.redundancy = static_cast<double>(tr.computed) * static_cast<double>(tc.computed) / ext_px_;
  double largest = 0, conv_temp = 0, slots = 0;
  for (int64_t b : batch_sizes)
  for (int64_t h : tr.extents)
    for (int64_t w : tc.extents) {
      const auto& a = walk(b, h, w);
      const bool kept_apart = !eager_ && cuda_;  // one set of buffers per shape, kept
      m.activations = kept_apart ? m.activations + a.peak_bytes : std::max(m.activations, a.peak_bytes);
      if (!eager_ && !cuda_)
        slots += static_cast<double>(nn::native_slot_bytes(
            g_, depth_ > 0 ? std::vector<int64_t>{1, channels_, b, h, w} : std::vector<int64_t>{b, channels_, h, w}, eb_));
      m.weights = a.weights_bytes;
      largest = std::max(largest, a.largest_bytes);
      conv_temp = std::max(conv_temp, a.conv_temp_peak_bytes - a.peak_bytes);
    }
  // What a denoiser call holds beyond its activations, and what it keeps between calls:
  //   eager, CUDA: cuDNN's workspaces;
  //   eager, CPU: a float32 buffer the size of a convolution's input or output (the larger)
  //   beside the live values (roofline::ActivationMemory::conv_temp_peak_bytes);
  //   native, CUDA: workspaces; its buffers stay (kept = activations); held to the plan, its
  //   warm-up's rivals and cuDNN's fallbacks (kNativeWarmupHeld);
  //   native, CPU: its own float32 copy of the weights and its slots (the values its plan
  //   preallocates, nn::native_slot_bytes), kept; its convolutions' outputs come and go as
  //   eager's do.
  //   A 3D network's convolutions (native, either device) take one more buffer the size of an
  //   activation, as eager's do on the CPU: a 32-slice 64² dncnn3d on the CPU peaked at 1.34x
  //   an estimate without it, and on an H100 the 512 x 512² volume's warm-up asked for a third
  //   8.6 GiB activation beside the two the walk counts.
  double kept = 0;
  if (eager_) {
    m.workspace = cuda_ ? (held_ ? kEagerWorkspaceCudaHeld : kEagerWorkspaceCuda) * largest : conv_temp;
    // the FP8 emulation's quantised copy of a convolution's input and its temporaries
    if (fp8_) m.workspace += 3 * largest;
  } else if (cuda_) {
    m.workspace = kNativeWorkspace * m.activations;
    kept = m.activations;
    if (g_.dim == 3) m.workspace += largest;
    if (held_) m.workspace += kNativeWarmupHeld * largest;
    // FP8: the e4m3 copy of a convolution's input (half a bf16 activation), and the weights'
    // e4m3 copies beside the bf16 ones
    if (fp8_native_) m.workspace += 0.5 * largest + 0.5 * m.weights;
  } else {
    m.workspace = m.weights * 4.0 / static_cast<double>(eb_) + slots;
    kept = m.workspace;
    if (g_.dim == 3) m.workspace += conv_temp;
  }
  const double patch_px = static_cast<double>(*tr.extents.rbegin()) * static_cast<double>(*tc.extents.rbegin());
  // the gathered output; one patch's contiguous input (float32) and its output copy
  m.patching = B * (m.patched() ? static_cast<double>(eb_) * ext_px_ + (4.0 + static_cast<double>(eb_)) * patch_px
                               : static_cast<double>(eb_) * ext_px_);
  const double resident = m.solver + m.quality + m.weights;
  const double denoise = m.activations + m.workspace + m.patching;
  const double others = kept + std::max(physics_, metrics_strips_);
  // the set-up also reads the weights, in float32 on the host: on a CPU device that copy, and the
  // converted one beside it when the denoiser's precision is not float32
  const double loading = cuda_ ? m.weights : m.weights * 4.0 / static_cast<double>(eb_) + (eb_ == 4 ? 0 : m.weights);
  const double total = std::max(resident + std::max(denoise, others), setup_ + loading);
  m.other = total - (resident + denoise);
  m.margin = cuda_ ? 0 : kCpuMargin * total;
  return m;
}

}  // namespace

double cuda_plan_bytes(double limit_gb, bool patched) {
  const double limit = limit_gb * 1e9;
  return std::max(0.0, std::min((patched ? kCudaPatchedShare : kCudaBudgetShare) * limit, limit - kCudaHeadroomFloor));
}

namespace {

// The bytes of denoiser.memory_limit_gb a plan may fill on ctx's device (0: no limit), whole
// tiles or patched.
double usable_bytes(double limit_gb, const MemoryContext& ctx, bool patched = false) {
  if (limit_gb <= 0) return 0;
  // a limit below the GPU's headroom leaves nothing to plan with (1 byte: no plan fits)
  return ctx.cuda ? std::max(1.0, cuda_plan_bytes(limit_gb, patched)) : limit_gb * 1e9;
}
// The limit whose usable share holds `bytes`.
double needed_limit(double bytes, const MemoryContext& ctx, bool patched) {
  if (!ctx.cuda) return bytes;
  return std::max(bytes / (patched ? kCudaPatchedShare : kCudaBudgetShare), bytes + kCudaHeadroomFloor);
}
// The bytes plan m may fill: the limit's share for m (whole or patched), else `room`.
double room_for(const MemoryPlan& m, double limit_gb, const MemoryContext& ctx, double room) {
  return limit_gb > 0 ? usable_bytes(limit_gb, ctx, m.patched()) : room;
}

}  // namespace

namespace {

// The plan with ctx.slices slices resident: the batch, then the patches. `fits`: within the
// limit (always, without one); else `least` is the smallest estimate any tiling reaches.
struct Fit {
  MemoryPlan plan, whole, least;
  bool fits = true;
};

Fit plan_resident(const Config& cfg, const nn::Graph& g, const TilePlan& tile, const MemoryContext& ctx, bool streamed) {
  const auto& dc = cfg.denoiser;
  Estimator est(cfg, g, tile, ctx, streamed);
  double limit = usable_bytes(dc.memory_limit_gb, ctx);
  // A volume's slab: the most slices per call that fit (whole tiles), else one at a time.
  const double room = limit > 0 ? limit : ctx.capacity;
  int64_t batch = est.slices();
  if (batch > 1 && room > 0 && ctx.depth == 0) {
    const AxisTiling r = est.rows(dc.patch_size), c = est.cols(dc.patch_size);
    int64_t lo = 1, hi = batch;  // the largest batch that fits, or 1
    while (lo < hi) {
      const int64_t mid = (lo + hi + 1) / 2;
      if (est(r, c, mid).total() <= room)
        lo = mid;
      else
        hi = mid - 1;
    }
    batch = lo;
  }
  Fit f;
  if (dc.patch_size > 0) {
    f.plan = f.whole = f.least = est(est.rows(dc.patch_size), est.cols(dc.patch_size), batch);
    return f;
  }
  f.whole = est(est.rows(0), est.cols(0), batch);
  if (limit <= 0 || f.whole.total() <= limit) {
    f.plan = f.least = f.whole;
    return f;
  }

  // Patches run without CUDA graphs: their share of the limit (kCudaPatchedShare).
  limit = usable_bytes(dc.memory_limit_gb, ctx, true);
  // The fewest computed pixels within the limit: for each row tiling (fewest patches first),
  // the column tiling with the fewest patches that fits (memory falls as patches shrink), until
  // the row tiling's own work already exceeds the best found.
  const auto rows = est.row_tilings(), cols = est.col_tilings();
  const double ext_cols = static_cast<double>(tile.ext.cols()), ext_px = static_cast<double>(tile.ext.size());
  bool found = false;
  for (const auto& tr : rows) {
    if (found && static_cast<double>(tr.computed) * ext_cols / ext_px >= f.plan.redundancy) break;
    // (at least two patches: a whole tile is held to the smaller share above)
    const size_t first = tr.ranges.size() == 1 ? 1 : 0;
    if (first >= cols.size() || est(tr, cols.back()).total() > limit) continue;
    size_t lo = first, hi = cols.size() - 1;  // cols[hi] fits
    while (lo < hi) {
      const size_t mid = (lo + hi) / 2;
      if (est(tr, cols[mid]).total() <= limit)
        hi = mid;
      else
        lo = mid + 1;
    }
    const MemoryPlan m = est(tr, cols[hi]);
    if (!found || m.redundancy < f.plan.redundancy || (m.redundancy == f.plan.redundancy && m.patches < f.plan.patches))
      f.plan = m, found = true;
  }
  f.fits = found;
  f.least = found ? f.plan : est(rows.back(), cols.back());
  return f;
}

}  // namespace

MemoryPlan estimate_memory(const Config& cfg, const nn::Graph& g, const TilePlan& tile, const MemoryContext& ctx,
                           int64_t patch_rows, int64_t patch_cols) {
  Estimator est(cfg, g, tile, ctx, ctx.stream > 0);
  return est(est.rows(patch_rows), est.cols(patch_cols));
}

MemoryPlan plan_memory(const Config& cfg, const nn::Graph& g, const TilePlan& tile, const MemoryContext& ctx) {
  const auto& dc = cfg.denoiser;
  const double limit = usable_bytes(dc.memory_limit_gb, ctx);
  const Fit all = plan_resident(cfg, g, tile, ctx, false);
  // A volume's slab that does not fit the limit (or, on a GPU, its memory) whole, or only in
  // patches that a group of its slices would not need, streams through the device: the most
  // slices per group that fit with the least redundant work, in groups of nearly equal size.
  const double room = limit > 0 ? limit : ctx.cuda ? ctx.capacity : 0;
  const bool streamable = ctx.slices > 1 && ctx.depth == 0 && dc.patch_size == 0;
  // (each plan against its own share of a limit: patched plans' is larger)
  auto within = [&](const MemoryPlan& m) { return m.total() <= room_for(m, dc.memory_limit_gb, ctx, room); };
  if (streamable && room > 0 && (!all.fits || !within(all.plan) || all.plan.patched())) {
    auto group = [&](int64_t resident) {
      MemoryContext c = ctx;
      c.slices = resident;
      Fit f = plan_resident(cfg, g, tile, c, true);
      f.fits = f.fits && within(f.plan);
      return f;
    };
    Fit one = group(1);
    const bool resident_fits = all.fits && within(all.plan);
    if (one.fits && (!resident_fits || one.plan.redundancy < all.plan.redundancy)) {
      const double least_work = one.plan.redundancy;  // a group's room shrinks as it grows
      int64_t lo = 1, hi = ctx.slices - 1;  // the largest group that fits with the least work
      while (lo < hi) {
        const int64_t mid = (lo + hi + 1) / 2;
        const Fit f = group(mid);
        if (f.fits && f.plan.redundancy <= least_work)
          lo = mid;
        else
          hi = mid - 1;
      }
      const int64_t groups = (ctx.slices + lo - 1) / lo;
      Fit f = group((ctx.slices + groups - 1) / groups);  // nearly equal groups
      f.plan.stream = (ctx.slices + groups - 1) / groups;
      f.plan.stream_groups = groups;
      return f.plan;
    }
    if (!one.fits && !resident_fits && limit > 0) {  // not even one slice at a time: the streamed minimum
      const MemoryPlan& least = one.least;
      throw InputError("denoiser.memory_limit_gb = " + std::to_string(dc.memory_limit_gb) + " GB is too small for slab " +
                       std::to_string(ctx.slices) + " x " + to_string(tile.ext) + ": the whole slab needs " +
                       all.whole.describe() + "; streamed one slice at a time, with the smallest patches, it still needs " +
                       human_bytes(least.total()) + ". The smallest limit that would do is denoiser.memory_limit_gb = " +
                       gb(needed_limit(least.total(), ctx, least.patched())) + ". Raise the limit, use more ranks, or denoiser.precision = \"bf16\"");
    }
  }
  if (all.fits) return all.plan;
  const MemoryPlan& least = all.least;
  Estimator est(cfg, g, tile, ctx, false);
  const int64_t ov = round_up(est.overlap(), est.align());
  throw InputError("denoiser.memory_limit_gb = " + std::to_string(dc.memory_limit_gb) + " GB is too small for tile " +
                   to_string(tile.ext) + ": the whole tile needs " + all.whole.describe() + "; the smallest patches (" +
                   std::to_string(2 * ov + est.align()) + " px = 2 x overlap " + std::to_string(ov) + " + alignment " +
                   std::to_string(est.align()) + ") still need " + human_bytes(least.total()) +
                   ". The smallest limit that would do is denoiser.memory_limit_gb = " + gb(needed_limit(least.total(), ctx, least.patched())) +
                   ". Raise the limit, use more ranks, or denoiser.precision = \"bf16\"");
}

std::pair<int64_t, int64_t> sinogram_dims(const Config& cfg) {
  const int64_t n = cfg.problem.size;
  return {cfg.problem.angles,
          cfg.problem.detector ? cfg.problem.detector : static_cast<int64_t>(std::ceil(std::sqrt(2.0) * double(n)))};
}

std::vector<MemoryPlan> memory_plans(const Config& cfg, const ExecutionPlan& plan, const nn::Graph& g,
                                     at::Device device, int local_size) {
  const auto [k, det] = sinogram_dims(cfg);
  MemoryContext ctx;
  ctx.angles = k, ctx.detectors = det, ctx.cuda = device.is_cuda();
  const ProblemConfig& p = cfg.problem;
  if (p.sinogram.empty())
    ctx.truth = true;
  else if (plan.decomp.z.volume())
    ctx.truth = !io::read_volume_shapes(p.sinogram, {p.data_path, p.theta_path, io::VolumePaths{}.white,
                                                     io::VolumePaths{}.dark, p.ground_truth_path})
                     .ground_truth.empty();
  else
    ctx.truth = io::read_dxchange_shapes(p.sinogram, {p.data_path, p.theta_path, p.ground_truth_path}).has_truth;
  std::vector<MemoryPlan> plans;
  const Decomposition& d = plan.decomp;
  if (!d.z.volume()) {
    for (const auto& t : d.tiles) plans.push_back(plan_memory(cfg, g, t, ctx));
    return plans;
  }
  // a volume: every world rank, its tile and its slab (the device's memory bounds the batch)
  ctx.capacity = 0.9 * (device.is_cuda() ? static_cast<double>(device_total_bytes(device))
                                          : host_memory_bytes() / std::max(1, local_size));
  const int ranks = static_cast<int>(d.z.ranges.size()) * d.z.plane_ranks;
  for (int r = 0; r < ranks; ++r) {
    ctx.slices = d.z.count(r);
    if (g.dim == 3) ctx.depth = d.z.ext(r).second - d.z.ext(r).first;
    plans.push_back(plan_memory(cfg, g, d.tile_of(r), ctx));
  }
  return plans;
}

}  // namespace pnp
