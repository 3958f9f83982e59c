// Shape inference over the IR (with the errors a bad input shape gets) and the receptive
// radius (the halo that makes a tiled or patched denoiser equal the whole-image one).
#include <algorithm>
#include <limits>
#include <numeric>
#include <string>

#include "pnp/nn/ir.hpp"

namespace pnp::nn {

namespace {
int64_t ceil_to(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

[[noreturn]] void shape_error(const Graph& g, const Node& n, const std::string& what) {
  throw InputError(g.architecture + " denoiser: node '" + n.name + "' (" + std::string(to_string(n.op)) +
                   "): " + what);
}
}  // namespace

std::vector<std::vector<int64_t>> infer_shapes(const Graph& g, const std::vector<int64_t>& in) {
  const size_t rank = static_cast<size_t>(g.dim) + 2;
  const std::string arch = g.architecture + " denoiser (" + std::to_string(g.dim) + "D)";
  if (in.size() != rank)
    throw InputError(arch + " needs a " + std::to_string(rank) + "-d input [B, C, " +
                     (g.dim == 2 ? "H, W" : "D, H, W") + "], got " + shape_string(in));
  if (in[1] != g.in_channels)
    throw InputError(arch + " needs " + std::to_string(g.in_channels) + " input channel(s), got " +
                     std::to_string(in[1]) + " in " + shape_string(in));
  for (auto s : in)
    if (s < 1) throw InputError(arch + ": empty input shape " + shape_string(in));
  const int64_t align = g.alignment();
  if (!g.pads_input() && align > 1)
    for (size_t a = 2; a < rank; ++a)
      if (in[a] % align != 0)
        throw InputError(arch + " was built without padding and needs spatial sizes that are multiples of " +
                         std::to_string(align) + ", got " + shape_string(in) +
                         " (build with padding, or pad the input to a multiple of " + std::to_string(align) + ")");

  std::vector<std::vector<int64_t>> shapes(g.nodes.size());
  for (const auto& n : g.nodes) {
    const auto& a = n.attrs;
    if (n.op == OpKind::input) {
      shapes[n.id] = in;
      continue;
    }
    const auto& x = shapes.at(n.inputs.at(0));
    std::vector<int64_t> y = x;
    switch (n.op) {
      case OpKind::sigma_channel:
        y[1] = 1;
        break;
      case OpKind::conv:
      case OpKind::conv_transpose:
      case OpKind::max_pool:
        if (n.op != OpKind::max_pool) {
          if (x[1] != a.in_channels)
            shape_error(g, n, "expects " + std::to_string(a.in_channels) + " channels, got " + shape_string(x));
          y[1] = a.out_channels;
        }
        for (int d = 0; d < g.dim; ++d) {
          const int64_t s = x[2 + d], k = a.kernel[d], st = a.stride[d], p = a.padding[d];
          int64_t o;
          if (n.op == OpKind::conv_transpose) {
            o = (s - 1) * st - 2 * p + k + (a.output_padding.empty() ? 0 : a.output_padding[d]);
          } else {
            if (s + 2 * p < k)
              shape_error(g, n, "spatial size " + std::to_string(s) + " is smaller than the kernel " +
                                    std::to_string(k) + " (input " + shape_string(x) + ")");
            if (st > 1 && (s + 2 * p - k) % st != 0)
              shape_error(g, n, "spatial size " + std::to_string(s) + " is not divisible by the stride " +
                                    std::to_string(st) + "; the denoiser needs sizes that are multiples of " +
                                    std::to_string(align) + " after padding (input " + shape_string(in) + ")");
            o = (s + 2 * p - k) / st + 1;
          }
          if (o < 1) shape_error(g, n, "empty output for input " + shape_string(x));
          y[2 + d] = o;
        }
        break;
      case OpKind::batch_norm:
        if (x[1] != a.out_channels)
          shape_error(g, n, "expects " + std::to_string(a.out_channels) + " channels, got " + shape_string(x));
        break;
      case OpKind::relu:
        break;
      case OpKind::add:
        for (size_t i = 1; i < n.inputs.size(); ++i)
          if (shapes[n.inputs[i]] != x)
            shape_error(g, n, "operand shapes differ: " + shape_string(x) + " and " + shape_string(shapes[n.inputs[i]]) +
                                  "; spatial sizes must be multiples of " + std::to_string(align) + " after padding");
        break;
      case OpKind::concat:
        for (size_t i = 1; i < n.inputs.size(); ++i) {
          auto z = shapes[n.inputs[i]];
          auto zz = z;
          zz[1] = x[1];
          if (zz != x)
            shape_error(g, n, "operand shapes differ outside channels: " + shape_string(x) + " and " + shape_string(z) +
                                  "; spatial sizes must be multiples of " + std::to_string(align) + " after padding");
          y[1] += z[1];
        }
        break;
      case OpKind::upsample_nearest:
        for (int d = 0; d < g.dim; ++d) y[2 + d] = x[2 + d] * a.scale[d];
        break;
      case OpKind::pad:
        for (int d = 0; d < g.dim; ++d) y[2 + d] = ceil_to(x[2 + d], a.multiple);
        break;
      case OpKind::crop: {
        const auto& like = shapes.at(n.inputs.at(1));
        for (int d = 0; d < g.dim; ++d) {
          if (like[2 + d] > x[2 + d])
            shape_error(g, n, "cannot crop " + shape_string(x) + " to the larger " + shape_string(like));
          y[2 + d] = like[2 + d];
        }
        break;
      }
      case OpKind::halo:
        for (int d = 0; d < g.dim; ++d) y[2 + d] = x[2 + d] + a.halo_lo[d] + a.halo_hi[d];
        break;
      case OpKind::input:
        break;
    }
    shapes[n.id] = std::move(y);
  }
  return shapes;
}

std::vector<int64_t> infer_output_shape(const Graph& g, std::vector<int64_t> input_shape) {
  return infer_shapes(g, input_shape).back();
}

namespace {
// One-axis dependency intervals [lo, hi] (input indices) of every position of every node.
struct Iv {
  int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
  bool empty() const { return lo > hi; }
  void join(const Iv& o) {
    lo = std::min(lo, o.lo);
    hi = std::max(hi, o.hi);
  }
};

int64_t radius_1d(const Graph& g, int axis, int64_t n_in) {
  std::vector<std::vector<Iv>> iv(g.nodes.size());
  for (const auto& n : g.nodes) {
    const auto& a = n.attrs;
    std::vector<Iv> out;
    if (n.op == OpKind::input) {
      out.resize(n_in);
      for (int64_t q = 0; q < n_in; ++q) out[q] = {q, q};
      iv[n.id] = std::move(out);
      continue;
    }
    const auto& x = iv[n.inputs[0]];
    const int64_t nx = static_cast<int64_t>(x.size());
    switch (n.op) {
      case OpKind::conv:
      case OpKind::max_pool: {
        const int64_t k = a.kernel[axis], s = a.stride[axis], p = a.padding[axis];
        const int64_t no = (nx + 2 * p - k) / s + 1;
        out.resize(std::max<int64_t>(no, 0));
        for (int64_t q = 0; q < no; ++q)
          for (int64_t t = 0; t < k; ++t) {
            const int64_t i = q * s - p + t;
            if (i >= 0 && i < nx) out[q].join(x[i]);
          }
        break;
      }
      case OpKind::conv_transpose: {
        const int64_t k = a.kernel[axis], s = a.stride[axis], p = a.padding[axis];
        const int64_t no = (nx - 1) * s - 2 * p + k + (a.output_padding.empty() ? 0 : a.output_padding[axis]);
        out.resize(no);
        for (int64_t i = 0; i < nx; ++i)
          for (int64_t t = 0; t < k; ++t) {
            const int64_t q = i * s - p + t;
            if (q >= 0 && q < no) out[q].join(x[i]);
          }
        break;
      }
      case OpKind::upsample_nearest: {
        const int64_t s = a.scale[axis];
        out.resize(nx * s);
        for (int64_t q = 0; q < nx * s; ++q) out[q] = x[q / s];
        break;
      }
      case OpKind::pad: {
        const int64_t no = ceil_to(nx, a.multiple);
        out.resize(no);
        for (int64_t q = 0; q < no; ++q) out[q] = x[std::min(q, nx - 1)];
        break;
      }
      case OpKind::crop: {
        const int64_t no = static_cast<int64_t>(iv[n.inputs[1]].size());
        out.assign(x.begin(), x.begin() + no);
        break;
      }
      case OpKind::halo: {  // the grown sides depend on pixels outside this line: none here
        out.assign(static_cast<size_t>(a.halo_lo[axis]), Iv{});
        out.insert(out.end(), x.begin(), x.end());
        out.resize(out.size() + static_cast<size_t>(a.halo_hi[axis]));
        break;
      }
      case OpKind::add:
      case OpKind::concat:
        out = x;
        for (size_t j = 1; j < n.inputs.size(); ++j) {
          const auto& z = iv[n.inputs[j]];
          for (size_t q = 0; q < out.size() && q < z.size(); ++q) out[q].join(z[q]);
        }
        break;
      default:  // sigma_channel (conservatively as its input), batch_norm, relu
        out = x;
        break;
    }
    iv[n.id] = std::move(out);
  }
  int64_t r = 0;
  const auto& y = iv.back();
  for (int64_t q = 0; q < static_cast<int64_t>(y.size()); ++q)
    if (!y[q].empty()) r = std::max({r, q - y[q].lo, y[q].hi - q});
  return r;
}
}  // namespace

int64_t receptive_radius(const Graph& g) {
  const int64_t align = g.alignment();
  int64_t r = 0;
  for (int axis = 0; axis < g.dim; ++axis) {
    // Grow the line until its middle is free of boundary effects.
    for (int64_t n = ceil_to(256, align);; n *= 4) {
      const int64_t ra = radius_1d(g, axis, n);
      if (4 * ra + 4 * align < n) {
        r = std::max(r, ra);
        break;
      }
      if (n > (int64_t{1} << 24)) throw Error("receptive_radius: did not converge for " + g.architecture);
    }
  }
  return r;
}

}  // namespace pnp::nn
