// Names and sizes of DType, and shape arithmetic with overflow checks (shapes come from files).
#include "engine/weights/dtype.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <limits>
#include <utility>

namespace hippo::engine {
namespace {

constexpr std::array<std::pair<DType, std::string_view>, 8> kNames{{
    {DType::kF32, "F32"},
    {DType::kBF16, "BF16"},
    {DType::kF8E4M3, "F8_E4M3"},
    {DType::kF8E8M0, "F8_E8M0"},
    {DType::kI8, "I8"},
    {DType::kU8, "U8"},
    {DType::kI32, "I32"},
    {DType::kI64, "I64"},
}};

}  // namespace

std::string_view dtype_name(DType dtype) {
  for (const auto& [d, name] : kNames)
    if (d == dtype) return name;
  return "?";
}

Result<DType> parse_dtype(std::string_view name) {
  for (const auto& [d, n] : kNames)
    if (n == name) return d;
  return make_error(ErrorCode::kCorrupt, "unsupported dtype '{}'", name);
}

int64_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 4;
    case DType::kBF16: return 2;
    case DType::kF8E4M3:
    case DType::kF8E8M0:
    case DType::kI8:
    case DType::kU8: return 1;
    case DType::kI32: return 4;
    case DType::kI64: return 8;
  }
  return 0;
}

int64_t element_count(std::span<const int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return -1;
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) return -1;
    n *= d;
  }
  return n;
}

std::string shape_string(std::span<const int64_t> shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

}  // namespace hippo::engine
