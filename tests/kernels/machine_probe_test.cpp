#include "kernels/cpu/machine_probe.h"

#include <catch2/catch.hpp>

#include <algorithm>

namespace cpu = hippo::kernels::cpu;

TEST_CASE("the machine description comes from the running system", "[probe]") {
  cpu::MachineInfo info = cpu::describe_machine();
  CHECK(info.logical_cpus >= 1);
  CHECK_FALSE(info.cpu_model.empty());
  CHECK(info.memory_bytes > (std::uint64_t{256} << 20));
#if defined(__x86_64__)
  auto has = [&](const char* f) {
    return std::find(info.simd_flags.begin(), info.simd_flags.end(), f) != info.simd_flags.end();
  };
  CHECK(has("avx2") == static_cast<bool>(__builtin_cpu_supports("avx2")));
  CHECK(has("avx512f") == static_cast<bool>(__builtin_cpu_supports("avx512f")));
#endif
}

TEST_CASE("the bandwidth probe verifies its kernels and reports a plausible figure", "[probe]") {
  auto r = cpu::measure_memory_bandwidth({std::size_t{16} << 20, 2, 2});
  REQUIRE(r.ok());
  CHECK(r->threads == 2);
  CHECK(r->bytes_per_array == (std::size_t{16} << 20));
  // Between 100 MB/s (anything slower is a broken probe) and 10 TB/s (faster than any DRAM).
  CHECK(r->read_bytes_per_second > 1e8);
  CHECK(r->read_bytes_per_second < 1e13);
  CHECK(r->triad_bytes_per_second > 1e8);
  CHECK(r->triad_bytes_per_second < 1e13);
}

TEST_CASE("the bandwidth probe refuses arguments it cannot measure", "[probe]") {
  auto tiny = cpu::measure_memory_bandwidth({4096, 4, 1});
  REQUIRE_FALSE(tiny.ok());
  CHECK(tiny.status().code() == hippo::ErrorCode::kInvalidArgument);
  CHECK_FALSE(cpu::measure_memory_bandwidth({std::size_t{16} << 20, 1, 0}).ok());
}

TEST_CASE("the FMA probe uses the widest FMA the CPU has and checks its arithmetic", "[probe]") {
  auto r = cpu::measure_peak_fma({1, 1u << 16});
  REQUIRE(r.ok());
  CHECK(r->isa == cpu::best_fma_isa());
  CHECK(r->threads == 1);
  // At least 0.1 GFLOP/s (a scalar core manages more), at most 10 TFLOP/s per core.
  CHECK(r->flops_per_second > 1e8);
  CHECK(r->flops_per_second < 1e13);
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f")) CHECK(r->isa == "avx512f");
#endif
  CHECK_FALSE(cpu::measure_peak_fma({1, 0}).ok());
}
