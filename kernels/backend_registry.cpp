#include "kernels/backend_registry.h"

#include "kernels/cpu/cpu_backend.h"
#include "kernels/ref/ref_backend.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace hippo::kernels {

std::vector<std::string> backend_names() { return {"cpu", "ref"}; }

Result<std::unique_ptr<Backend>> make_backend(const std::string& name, int threads) {
  if (name == "cpu") return cpu::make_cpu_backend(threads);
  if (name == "ref") return ref::make_ref_backend();
  return Status(ErrorCode::kInvalidArgument,
                fmt::format("unknown backend '{}' (this build has: {})", name, fmt::join(backend_names(), ", ")));
}

}  // namespace hippo::kernels
