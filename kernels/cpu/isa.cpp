#include "kernels/cpu/isa.h"

namespace hippo::kernels::cpu {

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

}  // namespace hippo::kernels::cpu
