#include "kernels/backend_registry.h"

#include "kernels/cpu/cpu_backend.h"
#include "kernels/ref/ref_backend.h"
#ifdef HIPPO_HAVE_GPU
#include "kernels/cuda/cuda_backend.h"
#endif

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <string_view>

namespace hippo::kernels {

#ifdef HIPPO_HAVE_GPU
namespace {
// The GPU backend's name: the same kernel sources, built for NVIDIA (CUDA) or AMD (HIP).
#ifdef HIPPO_GPU_HIP
constexpr std::string_view kGpu = "hip";
#else
constexpr std::string_view kGpu = "cuda";
#endif
}  // namespace
#endif

std::vector<std::string> backend_names() {
#ifdef HIPPO_HAVE_GPU
  return {"cpu", "ref", std::string(kGpu)};
#else
  return {"cpu", "ref"};
#endif
}

namespace {

// The device of "<gpu>" (0) or "<gpu>:N" (N, at most 4 digits); -1 for any other name.
int gpu_device(const std::string& name) {
#ifdef HIPPO_HAVE_GPU
  if (name == kGpu) return 0;
  if (!name.starts_with(kGpu) || name.size() <= kGpu.size() || name[kGpu.size()] != ':') return -1;
  const std::string index = name.substr(kGpu.size() + 1);
  if (index.empty() || index.size() > 4 ||
      !std::all_of(index.begin(), index.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return -1;
  return std::stoi(index);
#else
  static_cast<void>(name);
  return -1;
#endif
}

}  // namespace

bool is_backend_name(const std::string& name) { return name == "cpu" || name == "ref" || gpu_device(name) >= 0; }

Result<std::unique_ptr<Backend>> make_backend(const std::string& name, int threads) {
  if (name == "cpu") return cpu::make_cpu_backend(threads);
  if (name == "ref") return ref::make_ref_backend();
#ifdef HIPPO_HAVE_GPU
  if (const int device = gpu_device(name); device >= 0) return cuda::make_cuda_backend(device);
#endif
  return Status(ErrorCode::kInvalidArgument,
                fmt::format("unknown backend '{}' (this build has: {})", name, fmt::join(backend_names(), ", ")));
}

}  // namespace hippo::kernels
