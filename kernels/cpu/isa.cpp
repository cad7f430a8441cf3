#include "kernels/cpu/isa.h"

#include <atomic>
#include <iterator>

namespace hippo::kernels::cpu {
namespace {

constexpr bool enum_is_best_first() {
  for (int i = 0; i < static_cast<int>(std::size(kIsasBestFirst)); ++i)
    if (static_cast<int>(kIsasBestFirst[i]) != i) return false;
  return true;
}
static_assert(enum_is_best_first(), "the cap compares places in kIsasBestFirst as the enum's values");

std::atomic<int> isa_cap{0};  // the best instruction set allowed, as its place in kIsasBestFirst
std::atomic<bool> cap_fixed{false};

bool hardware_runs(Isa isa) {
  switch (isa) {
#if defined(__x86_64__)
    case Isa::kAvx512Vbmi: return __builtin_cpu_supports("x86-64-v4") && __builtin_cpu_supports("avx512vbmi");
    case Isa::kAvx512: return __builtin_cpu_supports("x86-64-v4");
    case Isa::kAvx2: return __builtin_cpu_supports("x86-64-v3");
#else
    case Isa::kAvx512Vbmi:
    case Isa::kAvx512:
    case Isa::kAvx2: return false;
#endif
    case Isa::kGeneric: break;
  }
  return true;
}

}  // namespace

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::kAvx512Vbmi: return "avx512vbmi";
    case Isa::kAvx512: return "avx512";
    case Isa::kAvx2: return "avx2";
    case Isa::kGeneric: break;
  }
  return "generic";
}

std::optional<Isa> isa_named(std::string_view name) {
  for (Isa isa : kIsasBestFirst)
    if (isa_name(isa) == name) return isa;
  return std::nullopt;
}

bool cpu_runs(Isa isa) {
  cap_fixed.store(true);
  return static_cast<int>(isa) >= isa_cap.load() && hardware_runs(isa);
}

Status limit_isa(std::string_view name) {
  const std::optional<Isa> isa = isa_named(name);
  if (!isa)
    return make_error(ErrorCode::kInvalidArgument,
                      "instruction set '{}' is not one of avx512vbmi, avx512, avx2, generic", name);
  if (!hardware_runs(*isa))
    return make_error(ErrorCode::kInvalidArgument, "instruction set '{}' does not run on this CPU", name);
  if (cap_fixed.load() && isa_cap.load() != static_cast<int>(*isa))
    return make_error(ErrorCode::kFailedPrecondition,
                      "instruction set '{}': the CPU kernels have already picked theirs in this process", name);
  isa_cap.store(static_cast<int>(*isa));
  return {};
}

}  // namespace hippo::kernels::cpu
