#include "kernels/op_timing_backend.h"

#include "kernels/backend_registry.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

namespace hippo::kernels {
namespace {

std::unique_ptr<Backend> cpu_backend() {
  auto backend = make_backend("cpu", 2);
  REQUIRE(backend.ok());
  return std::move(*backend);
}

TEST_CASE("the op-timing backend gives its backend's results and counts each op call under its op", "[kernels]") {
  auto plain = cpu_backend();
  OpTimingBackend timed(cpu_backend());
  CHECK(std::strcmp(timed.name(), plain->name()) == 0);
  CHECK(timed.threads() == plain->threads());
  CHECK(timed.supports(Op::kIndexer) == plain->supports(Op::kIndexer));

  const std::int64_t rows = 3, n = 40;
  std::vector<float> x(static_cast<size_t>(rows * n)), weight(static_cast<size_t>(n));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) - 2.5f;
  for (size_t i = 0; i < weight.size(); ++i) weight[i] = 0.5f + static_cast<float>(i) / 64.0f;
  std::vector<float> expected(x.size()), got(x.size());
  plain->rms_norm(x.data(), rows, n, weight.data(), 1e-6f, expected.data());
  timed.rms_norm(x.data(), rows, n, weight.data(), 1e-6f, got.data());
  CHECK(got == expected);
  timed.rms_norm(got.data(), rows, n, nullptr, 1e-6f, got.data());
  plain->rms_norm(expected.data(), rows, n, nullptr, 1e-6f, expected.data());
  CHECK(got == expected);
  std::vector<std::uint8_t> entries(static_cast<size_t>(rows * kv_entry_bytes(KvFormat::kIndex, n)));
  timed.kv_encode(KvFormat::kIndex, x.data(), rows, n, entries.data());

  const auto norm = static_cast<size_t>(Op::kRmsNorm), encode = static_cast<size_t>(Op::kKvEncode);
  CHECK(timed.totals().calls[norm] == 2);
  CHECK(timed.totals().calls[encode] == 1);
  CHECK(timed.totals().seconds[norm] > 0.0);
  for (size_t op = 0; op < kOpCount; ++op) {
    if (op == norm || op == encode) continue;
    CHECK(timed.totals().calls[op] == 0);
    CHECK(timed.totals().seconds[op] == 0.0);
  }
  timed.reset();
  CHECK(timed.totals().calls[norm] == 0);
  CHECK(timed.totals().seconds[norm] == 0.0);
}

}  // namespace
}  // namespace hippo::kernels
