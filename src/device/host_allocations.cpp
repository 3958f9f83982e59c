// Counting of LibTorch's host (CPU) tensor allocations (include/pnp/device.hpp,
// count_host_allocations): a wrapper around the default CPU allocator that keeps the bytes live
// and their peak, so that the memory plan can be checked against measured allocations on a
// machine without a GPU, as the caching allocator's statistics check it on one.
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <unordered_map>

#include "pnp/device.hpp"

namespace pnp {

namespace {

class CountingCpuAllocator final : public c10::Allocator {
 public:
  explicit CountingCpuAllocator(c10::Allocator* base) : base_(base), base_free_(base->raw_deleter()) {}

  c10::DataPtr allocate(size_t n) override {
    c10::DataPtr d = base_->allocate(n);
    // The default allocator's data pointer is its own context (raw_allocate relies on it); the
    // pointer is handed on the same way, with this allocator's deleter.
    void* p = d.release_context();
    if (p) {
      std::lock_guard<std::mutex> lock(mutex_);
      sizes_[p] = n;
      live_ += static_cast<int64_t>(n);
      peak_ = std::max(peak_, live_);
    }
    return {p, p, &CountingCpuAllocator::free, c10::Device(c10::kCPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &CountingCpuAllocator::free; }
  void copy_data(void* dest, const void* src, std::size_t count) const override { default_copy_data(dest, src, count); }

  static void free(void* p) {
    CountingCpuAllocator* self = instance();
    if (p) {
      std::lock_guard<std::mutex> lock(self->mutex_);
      auto it = self->sizes_.find(p);
      if (it != self->sizes_.end()) {
        self->live_ -= static_cast<int64_t>(it->second);
        self->sizes_.erase(it);
      }
    }
    self->base_free_(p);
  }

  int64_t peak() {
    std::lock_guard<std::mutex> lock(mutex_);
    return peak_;
  }
  void reset_peak() {
    std::lock_guard<std::mutex> lock(mutex_);
    peak_ = live_;
  }

  static CountingCpuAllocator*& instance() {
    static CountingCpuAllocator* one = nullptr;
    return one;
  }

 private:
  c10::Allocator* base_;
  c10::DeleterFnPtr base_free_;
  std::mutex mutex_;
  std::unordered_map<void*, size_t> sizes_;
  int64_t live_ = 0, peak_ = 0;
};

}  // namespace

void count_host_allocations() {
  static std::once_flag once;
  std::call_once(once, [] {
    c10::Allocator* base = c10::GetDefaultCPUAllocator();
    // Never freed: tensors made through it may outlive every other static.
    auto* counting = new CountingCpuAllocator(base);
    CountingCpuAllocator::instance() = counting;
    c10::SetCPUAllocator(counting, /*priority=*/1);
  });
}

int64_t host_peak_bytes() {
  CountingCpuAllocator* a = CountingCpuAllocator::instance();
  return a ? a->peak() : 0;
}

void reset_host_peak() {
  if (CountingCpuAllocator* a = CountingCpuAllocator::instance()) a->reset_peak();
}

}  // namespace pnp
