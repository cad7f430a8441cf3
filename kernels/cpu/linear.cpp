// Chooses the linear() implementation once, from what this CPU supports.
#include "kernels/cpu/linear.h"

#include "kernels/cpu/isa.h"

namespace hippo::kernels::cpu {

void linear_avx512vbmi(const float* x, std::int64_t m, const WeightView& w, const LinearOut& y, ThreadPool& pool);
void linear_avx512(const float* x, std::int64_t m, const WeightView& w, const LinearOut& y, ThreadPool& pool);
void linear_avx2(const float* x, std::int64_t m, const WeightView& w, const LinearOut& y, ThreadPool& pool);
void linear_generic(const float* x, std::int64_t m, const WeightView& w, const LinearOut& y, ThreadPool& pool);
void decode_rows_transposed_avx512vbmi(const WeightView& w, std::int64_t r0, std::int64_t n, float* kt, std::int64_t ld);
void decode_rows_transposed_avx512(const WeightView& w, std::int64_t r0, std::int64_t n, float* kt, std::int64_t ld);
void decode_rows_transposed_avx2(const WeightView& w, std::int64_t r0, std::int64_t n, float* kt, std::int64_t ld);
void decode_rows_transposed_generic(const WeightView& w, std::int64_t r0, std::int64_t n, float* kt, std::int64_t ld);

namespace {

using LinearFn = void (*)(const float*, std::int64_t, const WeightView&, const LinearOut&, ThreadPool&);
using DecodeTransposedFn = void (*)(const WeightView&, std::int64_t, std::int64_t, float*, std::int64_t);

struct Choice {
  LinearFn fn;
  DecodeTransposedFn decode_transposed;
  Isa isa;
};

Choice version(Isa isa) {
  switch (isa) {
    case Isa::kAvx512Vbmi: return {linear_avx512vbmi, decode_rows_transposed_avx512vbmi, isa};
    case Isa::kAvx512: return {linear_avx512, decode_rows_transposed_avx512, isa};
    case Isa::kAvx2: return {linear_avx2, decode_rows_transposed_avx2, isa};
    case Isa::kGeneric: break;
  }
  return {linear_generic, decode_rows_transposed_generic, Isa::kGeneric};
}

// Best first.
std::vector<Choice> runnable() {
  std::vector<Choice> out;
  for (Isa isa : kIsasBestFirst)
    if (cpu_runs(isa)) out.push_back(version(isa));
  return out;
}

const Choice& chosen() {
  static const Choice choice = runnable().front();
  return choice;
}

}  // namespace

void linear(const float* x, std::int64_t m, const WeightView& w, float* y, ThreadPool& pool) {
  if (m <= 0) return;
  chosen().fn(x, m, w, LinearOut{y, nullptr}, pool);
}

void linear_rows(const float* x, std::int64_t m, const WeightView& w, float* const* y_rows, ThreadPool& pool) {
  if (m <= 0) return;
  chosen().fn(x, m, w, LinearOut{nullptr, y_rows}, pool);
}

void decode_rows_transposed(const WeightView& w, std::int64_t r0, std::int64_t n, float* kt, std::int64_t ld) {
  if (n > 0) chosen().decode_transposed(w, r0, n, kt, ld);
}

std::string linear_isa() { return std::string(isa_name(chosen().isa)); }

bool fp4_lane_order_pays(const std::string& isa) {
  return isa == isa_name(Isa::kAvx512) || isa == isa_name(Isa::kAvx512Vbmi);
}

bool fp8_special_blocks_pay(const std::string& isa) {
  return isa == isa_name(Isa::kAvx512Vbmi) || isa == isa_name(Isa::kAvx512) || isa == isa_name(Isa::kAvx2);
}

std::vector<std::string> runnable_linear_isas() {
  std::vector<std::string> names;
  for (const Choice& c : runnable()) names.emplace_back(isa_name(c.isa));
  return names;
}

Status linear_with_isa(const std::string& isa, const float* x, std::int64_t m, const WeightView& w, float* y,
                       ThreadPool& pool) {
  for (const Choice& c : runnable()) {
    if (isa != isa_name(c.isa)) continue;
    if (m > 0) c.fn(x, m, w, LinearOut{y, nullptr}, pool);
    return {};
  }
  return make_error(ErrorCode::kInvalidArgument, "linear: instruction set '{}' does not run on this CPU", isa);
}

Status decode_rows_transposed_with_isa(const std::string& isa, const WeightView& w, std::int64_t r0, std::int64_t n,
                                      float* kt, std::int64_t ld) {
  for (const Choice& c : runnable()) {
    if (isa != isa_name(c.isa)) continue;
    if (n > 0) c.decode_transposed(w, r0, n, kt, ld);
    return {};
  }
  return make_error(ErrorCode::kInvalidArgument, "decode_rows_transposed: instruction set '{}' does not run on this CPU", isa);
}

}  // namespace hippo::kernels::cpu
