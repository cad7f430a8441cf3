// `hippo bench model`: prefill and decode speed of the CPU engine on a checkpoint, and the memory it
// holds. For each context length L: L deterministic token ids prefilled through Model::prefill (the
// encoder/decoder plan on), then N single-token decode steps at that context; median, min and max
// over the repetitions, after one warm-up (a prefill of up to 512 tokens and the decode steps). One context is also prefilled with the plan off, to show
// what the plan buys, and its session state must equal the plan's bit for bit (a fast wrong answer
// fails). scripts/bench_model.py runs the transformers reference on the same checkpoint and token
// ids in the same run (docs/benchmarks/model.md).
//
// --synthetic-state: each context is instead a state of L tokens built in place (SessionState::
// synthetic, its compressed KV and index keys those of `hippo bench storage`, so a model of the
// small-fullkv preset's geometry), for the decode speed at contexts too long to prefill here; there
// is no prefill to time.
//
// --op-times: the decode steps' time per op of the op layer (kernels/op_timing_backend.h) and outside
// them, per token and context: which part of a step grows with the context.
//
// The token ids are reproducible outside hippo (bench_token_ids.h): the first L values are the
// prompt, the next N the decode tokens. The JSON report carries their
// FNV-1a 64 digest so that a peer can check it fed the same ids.
#include "api/cli/bench_spread.h"
#include "api/cli/bench_token_ids.h"
#include "api/cli/cli.h"
#include "api/cli/clock.h"
#include "api/cli/process_memory.h"
#include "api/cli/synthetic_kv_state.h"
#include "api/cli/token_count.h"
#include "engine/model/model.h"
#include "engine/model/model_summary.h"
#include "kernels/backend_registry.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/machine_probe.h"
#include "kernels/cpu/zero_rows.h"
#include "kernels/op_timing_backend.h"

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <ostream>

namespace hippo::cli {
namespace {

using Clock = std::chrono::steady_clock;

// Bytes of the head's rows that are all zero bits (a head trained on part of the vocabulary, as the
// demo model's): a token need not read them, and the CPU backend does not (kernels/cpu/zero_rows.h).
int64_t head_zero_row_bytes(const engine::Checkpoint& checkpoint) {
  const engine::TensorView head =
      checkpoint.tensor(std::string(engine::head_weight_prefix(checkpoint.config().text_config)) + ".weight");
  if (head.spec->dtype != engine::DType::kF32 && head.spec->dtype != engine::DType::kBF16) return 0;
  const auto format = head.spec->dtype == engine::DType::kF32 ? kernels::WeightFormat::kF32 : kernels::WeightFormat::kBF16;
  const kernels::WeightView w{format, head.bytes.data(), nullptr, head.spec->shape[0], head.spec->shape[1], 0};
  int64_t zero = 0;
  for (int64_t r = 0; r < w.rows; ++r) zero += kernels::cpu::is_zero_row(w, r);
  return zero * (static_cast<int64_t>(head.bytes.size()) / w.rows);
}

struct ModelBenchOptions {
  std::string model_dir;
  std::vector<std::string> contexts = {"512", "4096", "32768"};
  int decode_steps = 32;
  int repetitions = 3;
  int threads = 0;
  std::string backend = kernels::kDefaultBackend;
  int64_t chunk = engine::PrefillOptions{}.chunk_tokens;
  int64_t plan_off_context = -1;  // -1: the largest context up to 4096 (else the smallest); 0: none
  bool synthetic_state = false;
  bool op_times = false;
  bool json = false;
};

uint64_t fnv1a64(std::span<const int32_t> ids) {
  uint64_t h = 1469598103934665603ull;
  for (int32_t id : ids) {
    const auto v = static_cast<uint32_t>(id);
    for (int b = 0; b < 4; ++b) {
      h ^= (v >> (8 * b)) & 0xffu;
      h *= 1099511628211ull;
    }
  }
  return h;
}

struct ContextResult {
  int64_t n_tokens = 0;
  Spread prefill_s, decode_s;  // seconds per prefill of n_tokens, per decode_steps steps
  uint64_t state_bytes = 0;    // SessionState::memory_bytes after prefill + decode
  int64_t rss_bytes = 0;       // process RSS after the last repetition
  int64_t peak_rss_bytes = 0;  // process peak RSS during this context's runs
  double load_average = 0;     // 1-minute load average when the context started
  kernels::OpTotals decode_ops;  // with --op-times: the decode steps' op times, summed over the repetitions
  double decode_total_s = 0;     // and their whole time
};

struct PlanOffResult {
  int64_t n_tokens = 0;
  Spread plan_on_s, plan_off_s;
  bool same_state = false;
};

class ModelBench {
 public:
  // timing: the model's backend when it times its ops (--op-times), else null.
  ModelBench(engine::Model& model, kernels::OpTimingBackend* timing, const ModelBenchOptions& options, int64_t max_tokens)
      : model_(model), timing_(timing), options_(options), ids_(bench_token_ids(max_tokens, model.text().vocab_size)) {}

  const std::vector<int32_t>& ids() const { return ids_; }

  // One prefill of the first n ids; progress on stderr when it is long.
  Result<double> prefill(engine::SessionState& state, int64_t n, bool plan, std::string_view what) {
    engine::PrefillOptions prefill;
    prefill.chunk_tokens = options_.chunk;
    prefill.encoder_decoder_plan = plan;
    const auto start = Clock::now();
    auto last_report = start;
    prefill.progress = [&](int64_t done, int64_t total) {
      if (done == total || seconds_since(last_report) < 10.0) return;
      last_report = Clock::now();
      const double s = seconds_since(start);
      std::cerr << fmt::format("bench model: {}: prefill {}/{} tokens, {:.0f} s, {:.0f} tokens/s\n", what, done, total,
                               s, static_cast<double>(done) / s)
                << std::flush;
    };
    HIPPO_RETURN_IF_ERROR(model_.prefill(state, std::span(ids_).first(static_cast<size_t>(n)), prefill));
    const double seconds = seconds_since(start);
    if (seconds > 10.0) {
      std::cerr << fmt::format("bench model: {}: prefill {} tokens in {:.1f} s, {:.1f} tokens/s\n", what, n, seconds,
                               static_cast<double>(n) / seconds)
                << std::flush;
    }
    return seconds;
  }

  // decode_steps single-token forwards after the first n ids; checks the logits are finite. Their op
  // times are added to `ops` when the backend times them.
  Result<double> decode(engine::SessionState& state, int64_t n, kernels::OpTotals* ops = nullptr) {
    if (timing_ != nullptr) timing_->reset();
    const auto start = Clock::now();
    for (int64_t i = 0; i < options_.decode_steps; ++i) {
      HIPPO_RETURN_IF_ERROR(model_.forward(state, std::span(ids_).subspan(static_cast<size_t>(n + i), 1)));
    }
    const double seconds = seconds_since(start);
    if (timing_ != nullptr && ops != nullptr) {
      for (size_t op = 0; op < kernels::kOpCount; ++op) {
        ops->seconds[op] += timing_->totals().seconds[op];
        ops->calls[op] += timing_->totals().calls[op];
      }
    }
    for (float x : state.next_logits())
      if (!std::isfinite(x)) return make_error(ErrorCode::kInternal, "bench model: a decode step gave a non-finite logit");
    return seconds;
  }

  Result<ContextResult> run_context(int64_t n) {
    ContextResult r;
    r.n_tokens = n;
    r.load_average = load_average();
    reset_peak_rss();
    std::vector<double> prefill_s, decode_s;
    std::optional<SyntheticKvState> kv;
    if (options_.synthetic_state) {
      kv = make_synthetic_kv_state(n, model_.n_threads());
      for (const engine::StateStream& stream : model_.new_session().streams()) {
        if (std::none_of(kv->streams.begin(), kv->streams.end(), [&](const SyntheticStream& s) { return s.name == stream.name; }))
          return make_error(ErrorCode::kInvalidArgument,
                            "bench model --synthetic-state: the synthetic KV has the small-fullkv preset's streams, and "
                            "this model's stream '{}' is not one of them",
                            stream.name);
      }
    }
    for (int rep = 0; rep < options_.repetitions; ++rep) {
      engine::SessionState state = model_.new_session();
      double p = 0;
      if (kv) {
        state = engine::SessionState::synthetic(model_.text(), std::vector<int32_t>(ids_.begin(), ids_.begin() + n),
                                                synthetic_stream_fill(*kv));
      } else {
        const std::string what = fmt::format("context {} (repetition {}/{})", n, rep + 1, options_.repetitions);
        HIPPO_ASSIGN_OR_RETURN(p, prefill(state, n, true, what));
      }
      HIPPO_ASSIGN_OR_RETURN(double d, decode(state, n, &r.decode_ops));
      r.decode_total_s += d;
      prefill_s.push_back(p);
      decode_s.push_back(d);
      r.state_bytes = state.memory_bytes();
      r.rss_bytes = proc_status_bytes("VmRSS:");
    }
    r.peak_rss_bytes = proc_status_bytes("VmHWM:");
    r.prefill_s = spread_of(prefill_s);
    r.decode_s = spread_of(decode_s);
    return r;
  }

  // Plan on and plan off, interleaved; the two states must be identical.
  Result<PlanOffResult> run_plan_off(int64_t n) {
    PlanOffResult r;
    r.n_tokens = n;
    r.same_state = true;
    std::vector<double> on_s, off_s;
    for (int rep = 0; rep < options_.repetitions; ++rep) {
      engine::SessionState on = model_.new_session(), off = model_.new_session();
      HIPPO_ASSIGN_OR_RETURN(double t_on, prefill(on, n, true, fmt::format("context {}, plan on", n)));
      HIPPO_ASSIGN_OR_RETURN(double t_off, prefill(off, n, false, fmt::format("context {}, plan off", n)));
      on_s.push_back(t_on);
      off_s.push_back(t_off);
      r.same_state = r.same_state && on == off;
    }
    r.plan_on_s = spread_of(on_s);
    r.plan_off_s = spread_of(off_s);
    return r;
  }

 private:
  engine::Model& model_;
  kernels::OpTimingBackend* timing_;
  const ModelBenchOptions& options_;
  std::vector<int32_t> ids_;
};

boost::json::object spread_json(const Spread& s) { return {{"median", s.median}, {"min", s.min}, {"max", s.max}}; }

double mb(uint64_t bytes) { return static_cast<double>(bytes) / 1e6; }
double mb(int64_t bytes) { return static_cast<double>(bytes) / 1e6; }

Status run_model_bench(const ModelBenchOptions& options, std::ostream& out) {
  std::vector<int64_t> contexts;
  for (const auto& c : options.contexts) {
    HIPPO_ASSIGN_OR_RETURN(int64_t n, parse_token_count(c, "--contexts", "512, 4096 or 32K"));
    contexts.push_back(n);
  }
  int64_t plan_off = options.synthetic_state ? 0 : options.plan_off_context;
  if (plan_off < 0) {
    plan_off = *std::min_element(contexts.begin(), contexts.end());
    for (int64_t n : contexts)
      if (n <= 4096) plan_off = std::max(plan_off, n);
  }
  const int64_t max_context = std::max(*std::max_element(contexts.begin(), contexts.end()), plan_off);

  const double start_load = load_average();
  const auto load_start = Clock::now();
  // The backend is made here (not by Model::load) so that --op-times can wrap it.
  HIPPO_ASSIGN_OR_RETURN(std::unique_ptr<kernels::Backend> backend, kernels::make_backend(options.backend, options.threads));
  kernels::OpTimingBackend* timing = nullptr;
  if (options.op_times) {
    auto timed = std::make_unique<kernels::OpTimingBackend>(std::move(backend));
    timing = timed.get();
    backend = std::move(timed);
  }
  HIPPO_ASSIGN_OR_RETURN(std::unique_ptr<engine::Model> model,
                         engine::Model::load(options.model_dir, std::move(backend), engine::ModelOptions{}));
  const double load_s = seconds_since(load_start);
  const uint64_t resident_after_load = model->checkpoint().resident_bytes();
  const int64_t rss_after_load = proc_status_bytes("VmRSS:");
  ModelBench bench(*model, timing, options, max_context + options.decode_steps);
  // The decode roof: the weight bytes a generated token reads over the read bandwidth measured now,
  // at the engine's thread count.
  const int64_t head_zero_bytes = head_zero_row_bytes(model->checkpoint());
  const double active_bytes = engine::count_parameters(model->config(), model->checkpoint().table()).active_decode_bytes -
                              static_cast<double>(head_zero_bytes);
  kernels::cpu::BandwidthOptions bandwidth_options;
  bandwidth_options.threads = model->n_threads();
  HIPPO_ASSIGN_OR_RETURN(const kernels::cpu::BandwidthResult bandwidth, kernels::cpu::measure_memory_bandwidth(bandwidth_options));
  const double roof_s = active_bytes / bandwidth.read_bytes_per_second;
  auto roof_share = [&](const ContextResult& r) { return roof_s / (r.decode_s.median / static_cast<double>(options.decode_steps)); };

  // Warm-up: one prefill of the smallest context, at most 512 tokens, and the decode steps after it
  // (pages the weights in, starts the pool, grows the allocator).
  {
    const int64_t n = std::min<int64_t>(512, *std::min_element(contexts.begin(), contexts.end()));
    engine::SessionState state = model->new_session();
    HIPPO_RETURN_IF_ERROR(bench.prefill(state, n, true, "warm-up").status());
    HIPPO_RETURN_IF_ERROR(bench.decode(state, n).status());
  }
  std::vector<ContextResult> results;
  for (int64_t n : contexts) {
    HIPPO_ASSIGN_OR_RETURN(ContextResult r, bench.run_context(n));
    results.push_back(r);
  }
  std::optional<PlanOffResult> plan;
  if (plan_off > 0) {
    HIPPO_ASSIGN_OR_RETURN(plan, bench.run_plan_off(plan_off));
    if (!plan->same_state) {
      return make_error(ErrorCode::kInternal,
                        "bench model: prefill of {} tokens with the encoder/decoder plan leaves a different session "
                        "state than without it",
                        plan_off);
    }
  }
  const uint64_t mapped = model->checkpoint().mapped_bytes();
  const uint64_t resident = model->checkpoint().resident_bytes();
  const int64_t peak_rss = proc_status_bytes("VmHWM:");
  const kernels::cpu::MachineInfo machine = kernels::cpu::describe_machine();
  const engine::TextConfig& t = model->text();
  const auto n_steps = static_cast<double>(options.decode_steps);
  // --op-times: ms per decode token of each op that ran, then of the engine outside the ops.
  const auto decode_tokens = n_steps * static_cast<double>(options.repetitions);
  auto op_ms = [&](const ContextResult& r, size_t op) { return 1e3 * r.decode_ops.seconds[op] / decode_tokens; };
  auto outside_ms = [&](const ContextResult& r) {
    double ops = 0;
    for (size_t op = 0; op < kernels::kOpCount; ++op) ops += r.decode_ops.seconds[op];
    return 1e3 * (r.decode_total_s - ops) / decode_tokens;
  };
  auto ran = [&](size_t op) {
    return std::any_of(results.begin(), results.end(), [&](const ContextResult& r) { return r.decode_ops.calls[op] > 0; });
  };

  if (options.json) {
    boost::json::array contexts_json;
    for (const ContextResult& r : results) {
      const auto n = static_cast<double>(r.n_tokens);
      boost::json::object context{
          {"n_tokens", r.n_tokens},
          {"prefill_s", spread_json(r.prefill_s)},
          {"prefill_tokens_per_s", spread_json({n / r.prefill_s.median, n / r.prefill_s.max, n / r.prefill_s.min})},
          {"decode_s", spread_json(r.decode_s)},
          {"decode_tokens_per_s",
           spread_json({n_steps / r.decode_s.median, n_steps / r.decode_s.max, n_steps / r.decode_s.min})},
          {"decode_roof_share", roof_share(r)},
          {"state_bytes", r.state_bytes},
          {"rss_bytes", r.rss_bytes},
          {"peak_rss_bytes", r.peak_rss_bytes},
          {"load_average", r.load_average},
          {"token_ids_fnv1a64",
           fmt::format("{:016x}", fnv1a64(std::span(bench.ids()).first(static_cast<size_t>(r.n_tokens + options.decode_steps))))},
      };
      if (options.synthetic_state) {  // nothing was prefilled
        context.erase("prefill_s");
        context.erase("prefill_tokens_per_s");
      }
      if (timing != nullptr) {
        boost::json::object ops;
        for (size_t op = 0; op < kernels::kOpCount; ++op)
          if (ran(op)) ops[kernels::op_name(kernels::kAllOps[op])] = op_ms(r, op);
        ops["outside_ops"] = outside_ms(r);
        context["decode_op_ms_per_token"] = std::move(ops);
      }
      contexts_json.push_back(std::move(context));
    }
    boost::json::object doc{
        {"model_dir", options.model_dir},
        {"quantised", model->config().quantised()},
        {"layers", t.num_hidden_layers},
        {"hidden_size", t.hidden_size},
        {"vocab_size", t.vocab_size},
        {"cpu_model", machine.cpu_model},
        {"logical_cpus", machine.logical_cpus},
        {"linear_isa", kernels::cpu::linear_isa()},
        {"load_average_at_start", start_load},
        {"backend", model->backend_name()},
        {"active_decode_bytes", active_bytes},
        {"read_bytes_per_second", bandwidth.read_bytes_per_second},
        {"threads", model->n_threads()},
        {"chunk_tokens", options.chunk},
        {"decode_steps", options.decode_steps},
        {"synthetic_state", options.synthetic_state},
        {"repetitions", options.repetitions},
        {"load_s", load_s},
        {"checkpoint_mapped_bytes", mapped},
        {"checkpoint_resident_bytes_after_load", resident_after_load},
        {"checkpoint_resident_bytes", resident},
        {"rss_bytes_after_load", rss_after_load},
        {"peak_rss_bytes", peak_rss},
        {"contexts", std::move(contexts_json)},
    };
    if (plan) {
      const auto n = static_cast<double>(plan->n_tokens);
      doc["plan_off"] = boost::json::object{
          {"n_tokens", plan->n_tokens},
          {"plan_on_s", spread_json(plan->plan_on_s)},
          {"plan_off_s", spread_json(plan->plan_off_s)},
          {"plan_on_tokens_per_s", n / plan->plan_on_s.median},
          {"plan_off_tokens_per_s", n / plan->plan_off_s.median},
          {"speedup", plan->plan_off_s.median / plan->plan_on_s.median},
          {"same_state", plan->same_state},
      };
    }
    out << boost::json::serialize(doc) << "\n";
    return {};
  }

  out << fmt::format("machine  {}, {} logical CPUs, linear ISA {}, load average {:.2f} at start\n",
                     machine.cpu_model, machine.logical_cpus, kernels::cpu::linear_isa(), start_load);
  out << fmt::format("model    {} ({}, {} layers, hidden {}, vocab {}), loaded in {:.2f} s\n", options.model_dir,
                     model->config().quantised() ? "quantised" : "plain", t.num_hidden_layers, t.hidden_size,
                     t.vocab_size, load_s);
  out << fmt::format("method   {} backend, threads {}; prefill through the encoder/decoder plan in chunks of {}; {} decode steps "
                     "after it; median of {} (min..max) after one warm-up of up to 512 tokens\n\n",
                     model->backend_name(), model->n_threads(), options.chunk, options.decode_steps, options.repetitions);
  out << fmt::format("roof     decode reads {:.1f} MB of weights per token{}; read bandwidth {:.1f} GB/s now: {:.2f} "
                     "ms/token at best ('roof' = that / the measured time)\n\n",
                     mb(static_cast<int64_t>(active_bytes)),
                     head_zero_bytes > 0 ? fmt::format(" (not the head's rows of zeros, {:.1f} MB)", mb(head_zero_bytes)) : "",
                     bandwidth.read_bytes_per_second / 1e9, 1e3 * roof_s);
  out << fmt::format("{:>8} | {:>10} {:>21} {:>9} | {:>10} {:>21} {:>9} {:>5} | {:>9} {:>9} {:>6}\n", "context",
                     "prefill/s", "(min..max)", "s", "decode/s", "(min..max)", "ms/token", "roof", "state MB", "RSS MB", "load");
  for (const ContextResult& r : results) {
    const auto n = static_cast<double>(r.n_tokens);
    const std::string prefill_rate = options.synthetic_state ? "synthetic" : fmt::format("{:.1f}", n / r.prefill_s.median);
    const std::string prefill_spread =
        options.synthetic_state ? "" : fmt::format("({:.1f}..{:.1f})", n / r.prefill_s.max, n / r.prefill_s.min);
    out << fmt::format("{:>8} | {:>10} {:>21} {:>9.3f} | {:>10.1f} {:>21} {:>9.2f} {:>4.0f}% | {:>9.3f} {:>9.1f} {:>6.2f}\n",
                       r.n_tokens, prefill_rate, prefill_spread, r.prefill_s.median,
                       n_steps / r.decode_s.median,
                       fmt::format("({:.1f}..{:.1f})", n_steps / r.decode_s.max, n_steps / r.decode_s.min),
                       1e3 * r.decode_s.median / n_steps, 100 * roof_share(r), mb(r.state_bytes), mb(r.rss_bytes), r.load_average);
  }
  if (timing != nullptr) {
    out << fmt::format("\ndecode ms/token by op\n{:>16}", "context");
    for (const ContextResult& r : results) out << fmt::format(" | {:>9}", r.n_tokens);
    out << "\n";
    for (size_t op = 0; op < kernels::kOpCount; ++op) {
      if (!ran(op)) continue;
      out << fmt::format("{:>16}", kernels::op_name(kernels::kAllOps[op]));
      for (const ContextResult& r : results) out << fmt::format(" | {:>9.3f}", op_ms(r, op));
      out << "\n";
    }
    out << fmt::format("{:>16}", "outside ops");
    for (const ContextResult& r : results) out << fmt::format(" | {:>9.3f}", outside_ms(r));
    out << "\n";
  }
  if (plan) {
    const auto n = static_cast<double>(plan->n_tokens);
    out << fmt::format("\nplan off at {} tokens: {:.1f} tokens/s ({:.3f} s) against {:.1f} tokens/s ({:.3f} s) with the "
                       "plan, interleaved: the plan is {:.2f}x faster; session states identical\n",
                       plan->n_tokens, n / plan->plan_off_s.median, plan->plan_off_s.median, n / plan->plan_on_s.median,
                       plan->plan_on_s.median, plan->plan_off_s.median / plan->plan_on_s.median);
  }
  out << fmt::format("\nmemory   checkpoint {:.1f} MB mapped, {:.1f} MB resident ({:.1f} MB after load); process RSS "
                     "{:.1f} MB after load, peak {:.1f} MB\n",
                     mb(mapped), mb(resident), mb(resident_after_load), mb(rss_after_load), mb(peak_rss));
  return {};
}

}  // namespace

void add_bench_model_command(CLI::App& bench, Invocation& inv) {
  auto options = std::make_shared<ModelBenchOptions>();
  CLI::App* cmd = bench.add_subcommand("model", "Prefill and decode speed, and resident memory, of the CPU engine");
  cmd->add_option("--model", options->model_dir, "Checkpoint directory (hippo model init writes one)")->required();
  cmd->add_option("--contexts", options->contexts, "Context lengths in tokens (512, 4096, 32K)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--decode-steps", options->decode_steps, "Single-token decode steps after each prefill")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--repetitions", options->repetitions, "Timed runs per context after one warm-up")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  add_engine_threads_option(*cmd, options->threads);
  add_backend_option(*cmd, options->backend);
  cmd->add_option("--chunk", options->chunk, "Prefill tokens per forward step")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--plan-off-at", options->plan_off_context,
                  "Also prefill this many tokens with the encoder/decoder plan off (-1: the largest context up to "
                  "4096; 0: skip)")
      ->check(CLI::Range(int64_t{-1}, int64_t{1} << 40))
      ->capture_default_str();
  cmd->add_flag("--synthetic-state", options->synthetic_state,
                "Decode on states of each context built in place (the synthetic KV of bench storage), no prefill");
  cmd->add_flag("--op-times", options->op_times,
                "Also the decode steps' time per op of the op layer and outside it, per token (times every op call)");
  cmd->add_flag("--json", options->json, "One JSON object instead of a table");
  cmd->parse_complete_callback([&inv, options] {
    inv.action = [&inv, options] { return run_model_bench(*options, *inv.out); };
  });
}

}  // namespace hippo::cli
