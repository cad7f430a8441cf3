// The instruction sets the CPU kernels have versions of, and which of them this CPU runs: the one
// probe behind every kernel that picks its version at run time (linear.cpp, row_scores).
#pragma once

#include "base/status.h"

#include <optional>
#include <string_view>

namespace hippo::kernels::cpu {

// Best first. kAvx512Vbmi: x86-64-v4 and AVX512_VBMI (byte permutes; Ice Lake, Zen 4 and later);
// kAvx512: x86-64-v4 (AVX-512 F, BW, CD, DQ, VL); kAvx2: x86-64-v3 (AVX2, FMA, F16C, BMI); kGeneric:
// plain C++, which every CPU runs.
enum class Isa { kAvx512Vbmi, kAvx512, kAvx2, kGeneric };
inline constexpr Isa kIsasBestFirst[] = {Isa::kAvx512Vbmi, Isa::kAvx512, Isa::kAvx2, Isa::kGeneric};

std::string_view isa_name(Isa isa);  // "avx512vbmi", "avx512", "avx2", "generic"
std::optional<Isa> isa_named(std::string_view name);

// Whether this CPU runs `isa` and it is not above the cap of limit_isa.
bool cpu_runs(Isa isa);

// Caps the instruction sets the kernels may pick to the one named and those below it (`hippo
// --cpu-isa avx2`: the AVX2 path on an AVX-512 machine). Only before the kernels first pick their
// versions (the first cpu_runs call fixes the cap). Errors: an unknown name, one this CPU does not
// run, or a cap already fixed to another.
Status limit_isa(std::string_view name);

}  // namespace hippo::kernels::cpu
