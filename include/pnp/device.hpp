// Devices: the one parser of device names ("cpu", "cuda", "cuda:N", "auto"), the concrete device
// behind "cuda", its name and memory statistics, and the one source of the CUDA version that
// provenance and cache keys record.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <string>

namespace pnp {

// "cpu", "cuda", "cuda:N", or "auto" (CUDA when a device is present, else the CPU). Throws
// InputError naming `what` (the option or key) for anything else, and for CUDA on a machine or
// build without it.
c10::Device parse_device(const std::string& name, const std::string& what);

// The device with its index made explicit: "cuda" (no index) becomes the current CUDA device,
// e.g. cuda:0; any other device is returned as is. The functions below take either.
c10::Device concrete_device(c10::Device d);
// Peak bytes allocated on a CUDA device by the caching allocator (0 on CPU or without CUDA),
// and a reset of that peak.
int64_t device_peak_bytes(c10::Device d);
void reset_device_peak(c10::Device d);
// A CUDA device's UUID as hex digits (stable whatever CUDA_VISIBLE_DEVICES numbers it); "cpu".
std::string device_uuid(c10::Device d);
// Total memory of a CUDA device in bytes (0 on CPU).
int64_t device_total_bytes(c10::Device d);
// Device name ("NVIDIA H200", or "cpu").
std::string device_name(c10::Device d);
// Number of CUDA devices this process sees (0 without CUDA).
int cuda_device_count();

// The CUDA runtime version LibTorch runs with, "13.0", or "none" in a build or on a machine
// without CUDA. Output provenance and the inductor cache key both use it.
std::string cuda_version();

}  // namespace pnp
