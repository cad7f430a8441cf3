// `hippo bench …`: benchmark commands whose results go to docs/BENCHMARKS.md. `bench machine`
// measures the physical limits that every other benchmark is stated against.
#include "api/cli/cli.h"
#include "kernels/cpu/machine_probe.h"
#ifdef HIPPO_HAVE_GPU
#include "kernels/cuda/bandwidth_probe.h"
#endif

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <ostream>

namespace hippo::cli {
namespace {

struct MachineBenchOptions {
  std::size_t bytes_per_array = kernels::cpu::BandwidthOptions{}.bytes_per_array;
  int threads = 0;
  int repetitions = kernels::cpu::BandwidthOptions{}.repetitions;
  bool json = false;
};

Status run_machine_bench(const MachineBenchOptions& options, std::ostream& out) {
  const kernels::cpu::MachineInfo machine = kernels::cpu::describe_machine();
  HIPPO_ASSIGN_OR_RETURN(auto bandwidth, kernels::cpu::measure_memory_bandwidth(
                                             {options.bytes_per_array, options.threads, options.repetitions}));
  HIPPO_ASSIGN_OR_RETURN(auto fma, kernels::cpu::measure_peak_fma({options.threads}));

  if (options.json) {
    boost::json::array flags;
    for (const auto& f : machine.simd_flags) flags.emplace_back(f);
    boost::json::object doc{
        {"cpu_model", machine.cpu_model},
        {"logical_cpus", machine.logical_cpus},
        {"memory_bytes", machine.memory_bytes},
        {"simd_flags", std::move(flags)},
        {"threads", bandwidth.threads},
        {"bytes_per_array", bandwidth.bytes_per_array},
        {"read_bytes_per_second", bandwidth.read_bytes_per_second},
        {"triad_bytes_per_second", bandwidth.triad_bytes_per_second},
        {"fma_isa", fma.isa},
        {"fma_flops_per_second", fma.flops_per_second},
    };
    out << boost::json::serialize(doc) << "\n";
    return {};
  }
  out << fmt::format("cpu            {} ({} logical CPUs)\n", machine.cpu_model, machine.logical_cpus);
  out << fmt::format("memory         {:.1f} GiB\n", static_cast<double>(machine.memory_bytes) / (1u << 30));
  out << fmt::format("simd           {}\n", fmt::join(machine.simd_flags, " "));
  out << fmt::format("read bw        {:.2f} GB/s  ({} threads, {} MiB array)\n", bandwidth.read_bytes_per_second / 1e9,
                     bandwidth.threads, bandwidth.bytes_per_array >> 20);
  out << fmt::format("triad bw       {:.2f} GB/s\n", bandwidth.triad_bytes_per_second / 1e9);
  out << fmt::format("fp32 fma peak  {:.1f} GFLOP/s  ({}, {} threads)\n", fma.flops_per_second / 1e9, fma.isa,
                     fma.threads);
#ifdef HIPPO_HAVE_GPU
  const auto gpu = kernels::cuda::measure_device_bandwidth(std::size_t{1} << 30, options.repetitions);
  if (gpu.ok)
    out << fmt::format("gpu triad bw   {:.1f} GB/s  ({})\n", gpu.triad_bytes_per_second / 1e9, gpu.device_name);
  else
    out << fmt::format("gpu            {}\n", gpu.error);
#endif
  return {};
}

}  // namespace

void add_bench_commands(CLI::App& app, Invocation& inv) {
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks (results belong in docs/BENCHMARKS.md)");
  bench->require_subcommand(1);

  auto machine_options = std::make_shared<MachineBenchOptions>();
  CLI::App* machine = bench->add_subcommand("machine", "Measure memory bandwidth and peak FMA throughput");
  machine->add_option("--bytes", machine_options->bytes_per_array, "Bytes per array (e.g. 256MiB); 8x the L3 or more")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  machine->add_option("--threads", machine_options->threads, "Threads (0 = every logical CPU)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  machine->add_option("--repetitions", machine_options->repetitions, "Timed passes after one warm-up")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  machine->add_flag("--json", machine_options->json, "One JSON object instead of a table");
  machine->parse_complete_callback([&inv, machine_options] {
    inv.action = [&inv, machine_options] { return run_machine_bench(*machine_options, *inv.out); };
  });

  add_storage_bench(*bench, inv);
  add_bench_model_command(*bench, inv);
  add_bench_speculative_command(*bench, inv);
  add_bench_kernels_command(*bench, inv);
  add_bench_agents_command(*bench, inv);
  add_bench_server_command(*bench, inv);
  add_bench_tokenizer_command(*bench, inv);
}

}  // namespace hippo::cli
