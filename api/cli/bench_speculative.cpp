// `hippo bench speculative`: what speculative decoding costs and gives on a checkpoint, at a context
// of L tokens (bench_token_ids.h).
//   verify cost  a forward of the last token and k = 1..5 drafts, settled keeping one token (a draft
//                rejected whole), against a plain decode step; the k values interleaved within each
//                repetition. From the ratio r_k follows the speedup at a per-token acceptance a:
//                (1 - a^(k+1)) / (1 - a) tokens per verify over r_k, and the acceptance that breaks even.
//                With DSpark stages, also a DSpark pass (Model::draft_dspark) against a decode step.
//   end to end   N greedy tokens decoded one at a time, with context drafts, with an oracle's drafts
//                (the plain run's next tokens: every one accepted) and with wrong drafts (every one
//                rejected), which must all give the same tokens (a fast wrong answer fails):
//                tokens/s, tokens per verify step and the acceptance per draft slot.
// The context is L synthetic tokens, or a transcript (--transcript: a text file, an agent's tool loop
// say, tokenized with the checkpoint's tokenizer) after which the model decodes.
#include "api/cli/bench_spread.h"
#include "api/cli/bench_token_ids.h"
#include "api/cli/cli.h"
#include "api/cli/clock.h"
#include "api/cli/token_count.h"
#include "engine/model/model.h"
#include "engine/speculative/decode_loop.h"
#include "engine/tokenizer/tokenizer.h"
#include "kernels/backend_registry.h"

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <ostream>
#include <string_view>

namespace hippo::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct SpeculativeBenchOptions {
  std::string model_dir;
  std::string context = "1024";
  std::string transcript;  // a text file whose tokens are the context instead
  int steps = 16;
  int repetitions = 5;
  int64_t generate = 128;
  int threads = 0;
  std::string backend = kernels::kDefaultBackend;
  bool json = false;
};

// Tokens per verify at per-token acceptance a with k drafts: 1 + a + ... + a^k.
double tokens_per_verify(double a, int64_t k) {
  double total = 0, term = 1;
  for (int64_t i = 0; i <= k; ++i, term *= a) total += term;
  return total;
}

// The acceptance at which k drafts at cost ratio r pay for themselves (1 when they never do).
double break_even(double r, int64_t k) {
  if (tokens_per_verify(1.0, k) <= r) return 1.0;
  double lo = 0, hi = 1;
  for (int i = 0; i < 60; ++i) ((tokens_per_verify((lo + hi) / 2, k) < r) ? lo : hi) = (lo + hi) / 2;
  return hi;
}

// `steps` steps from `base`, each feeding the last token and k drafts (none: a plain decode step) and
// settling one token.
Result<double> time_steps(engine::Model& model, const engine::SessionState& base, const std::vector<int32_t>& ids,
                          int64_t k, int steps) {
  engine::SessionState state = base;
  const auto start = Clock::now();
  for (int s = 0; s < steps; ++s) {
    const std::span<const int32_t> fed = std::span(ids).subspan(static_cast<size_t>(s), static_cast<size_t>(k + 1));
    if (k == 0) {
      HIPPO_RETURN_IF_ERROR(model.forward(state, fed));
      continue;
    }
    std::vector<float> rows;
    engine::ForwardRequest request{&state, fed, &rows, true};
    HIPPO_RETURN_IF_ERROR(model.forward(std::span(&request, 1)));
    HIPPO_RETURN_IF_ERROR(model.settle(state, 1, rows));
  }
  return seconds_since(start) / steps;
}

// `steps` DSpark passes (a block drafted after `base` and the anchor).
Result<double> time_dspark(engine::Model& model, engine::SessionState& base, int32_t anchor, int steps) {
  const auto start = Clock::now();
  for (int s = 0; s < steps; ++s) {
    engine::DsparkDraft block{&base, anchor, {}, {}};
    HIPPO_RETURN_IF_ERROR(model.draft_dspark(std::span(&block, 1)));
  }
  return seconds_since(start) / steps;
}

// One end-to-end decode of the bench.
struct DecodeRun {
  const char* name = "";
  std::vector<int32_t> tokens;
  engine::DecodeCounts counts;
  double seconds = 0;

  double tokens_per_s() const { return static_cast<double>(counts.generated) / seconds; }
  // Tokens a step with drafts gives (accepted drafts and the model's own); 1 without drafts.
  double tokens_per_verify() const {
    return counts.verifies == 0 ? 1.0 : static_cast<double>(counts.accepted + counts.verifies) / static_cast<double>(counts.verifies);
  }
  // Of the drafts in slot j, the share accepted (each was reached: the ones before it were).
  double slot_acceptance(size_t j) const {
    return counts.drafted_at[j] == 0 ? 0.0 : static_cast<double>(counts.accepted_at[j]) / static_cast<double>(counts.drafted_at[j]);
  }
};

Status run_speculative_bench(const SpeculativeBenchOptions& options, std::ostream& out) {
  HIPPO_ASSIGN_OR_RETURN(const int64_t synthetic, parse_token_count(options.context, "--context", "1024 or 32K"));
  engine::ModelOptions model_options;
  model_options.n_threads = options.threads;
  model_options.backend = options.backend;
  HIPPO_ASSIGN_OR_RETURN(std::unique_ptr<engine::Model> model, engine::Model::load(options.model_dir, model_options));
  constexpr int64_t kMaxDraft = engine::kMaxDraftTokens;
  std::vector<int32_t> context;
  if (!options.transcript.empty()) {
    HIPPO_ASSIGN_OR_RETURN(const tokenizer::Tokenizer tok,
                           tokenizer::Tokenizer::load(std::filesystem::path(options.model_dir) / "tokenizer.json"));
    std::ifstream in(options.transcript, std::ios::binary);
    if (!in) return make_error(ErrorCode::kNotFound, "bench speculative: cannot read the transcript {}", options.transcript);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    context = tok.encode(text);
    if (context.empty()) return make_error(ErrorCode::kInvalidArgument, "bench speculative: the transcript {} is empty", options.transcript);
  }
  const int64_t n = context.empty() ? synthetic : static_cast<int64_t>(context.size());
  std::vector<int32_t> ids = bench_token_ids(n + options.steps + kMaxDraft, model->text().vocab_size);
  std::copy(context.begin(), context.end(), ids.begin());
  engine::SessionState base = model->new_session();
  HIPPO_RETURN_IF_ERROR(model->prefill(base, std::span(ids).first(static_cast<size_t>(n))));
  const std::vector<int32_t> decode_ids(ids.begin() + n, ids.end());

  // Verify cost: one warm-up of each k, then the repetitions, k interleaved (and the DSpark pass).
  std::vector<std::vector<double>> seconds(kMaxDraft + 1);
  std::vector<double> dspark_seconds;
  for (int64_t k = 0; k <= kMaxDraft; ++k) HIPPO_RETURN_IF_ERROR(time_steps(*model, base, decode_ids, k, 2).status());
  if (model->has_dspark()) HIPPO_RETURN_IF_ERROR(time_dspark(*model, base, decode_ids[0], 2).status());
  for (int r = 0; r < options.repetitions; ++r) {
    for (int64_t k = 0; k <= kMaxDraft; ++k) {
      HIPPO_ASSIGN_OR_RETURN(double s, time_steps(*model, base, decode_ids, k, options.steps));
      seconds[static_cast<size_t>(k)].push_back(s);
    }
    if (model->has_dspark()) {
      HIPPO_ASSIGN_OR_RETURN(double s, time_dspark(*model, base, decode_ids[0], options.steps));
      dspark_seconds.push_back(s);
    }
  }
  std::vector<Spread> spread;
  for (const auto& s : seconds) spread.push_back(spread_of(s));
  const bool dspark = !dspark_seconds.empty();
  const Spread dspark_spread = dspark ? spread_of(dspark_seconds) : Spread{};

  // End to end, greedy, from the same state: plain; context drafts; DSpark's and the better of both
  // per step (checkpoints with DSpark stages); an oracle that drafts the plain run's next tokens
  // (every draft accepted: the most drafts can give); and one that drafts wrong tokens every step
  // (every draft rejected, no guard: the most failing drafts can cost).
  engine::SamplingParams greedy;
  std::vector<int32_t> plain_tokens;
  const auto vocab = static_cast<int32_t>(model->text().vocab_size);
  auto oracle = [&](bool right) -> engine::DraftSource {
    return [&, right](std::span<const int32_t> tokens, int32_t) {
      std::vector<int32_t> d;  // the state holds the context and the output before `last`
      for (auto i = static_cast<size_t>(static_cast<int64_t>(tokens.size()) - n + 1);
           i < plain_tokens.size() && d.size() < static_cast<size_t>(kMaxDraft); ++i) {
        d.push_back(right ? plain_tokens[i] : (plain_tokens[i] + 1) % vocab);
      }
      return d;
    };
  };
  std::vector<DecodeRun> runs;
  for (const char* name : {"plain", "context drafts", "dspark drafts", "auto drafts", "all accepted", "all rejected"}) {
    DecodeRun run;
    run.name = name;
    const std::string_view which = name;
    if ((which == "dspark drafts" || which == "auto drafts") && !model->has_dspark()) continue;
    engine::SessionState state = base;
    const engine::DraftSource source =
        which == "plain"            ? engine::DraftSource{}
        : which == "context drafts" ? engine::session_draft_source(*model, state, engine::DraftMode::kContext)
        : which == "dspark drafts"  ? engine::session_draft_source(*model, state, engine::DraftMode::kDspark)
        : which == "auto drafts"    ? engine::session_draft_source(*model, state, engine::DraftMode::kAuto)
                                    : oracle(which == "all accepted");
    engine::Sampler sampler(greedy);
    const auto start = Clock::now();
    HIPPO_ASSIGN_OR_RETURN(run.counts, engine::decode_tokens(*model, state, sampler, source, options.generate,
                                                             [&](int32_t token) {
                                                               run.tokens.push_back(token);
                                                               return true;
                                                             }));
    run.seconds = seconds_since(start);
    if (runs.empty()) plain_tokens = run.tokens;
    if (run.tokens != plain_tokens) {
      return make_error(ErrorCode::kInternal, "bench speculative: greedy decoding with {} gave other tokens than without",
                        name);
    }
    runs.push_back(std::move(run));
  }
  const double plain_tps = runs[0].tokens_per_s();

  if (options.json) {
    boost::json::array verify;
    for (int64_t k = 0; k <= kMaxDraft; ++k) {
      const double ratio = spread[static_cast<size_t>(k)].median / spread[0].median;
      verify.push_back(boost::json::object{{"drafts", k},
                                           {"seconds_median", spread[static_cast<size_t>(k)].median},
                                           {"seconds_min", spread[static_cast<size_t>(k)].min},
                                           {"seconds_max", spread[static_cast<size_t>(k)].max},
                                           {"cost_ratio", ratio},
                                           {"break_even_acceptance", k == 0 ? 0.0 : break_even(ratio, k)}});
    }
    boost::json::array decode;
    for (const DecodeRun& r : runs) {
      boost::json::array per_slot;
      for (size_t j = 0; j < r.counts.drafted_at.size(); ++j) per_slot.push_back(r.slot_acceptance(j));
      decode.push_back(boost::json::object{{"drafts", r.name},
                                           {"generated", r.counts.generated},
                                           {"tokens_per_s", r.tokens_per_s()},
                                           {"speedup", r.tokens_per_s() / plain_tps},
                                           {"drafted", r.counts.drafted},
                                           {"accepted", r.counts.accepted},
                                           {"verifies", r.counts.verifies},
                                           {"tokens_per_verify", r.tokens_per_verify()},
                                           {"acceptance_per_slot", std::move(per_slot)}});
    }
    boost::json::object doc{{"model", options.model_dir},
                            {"backend", model->backend_name()},
                            {"threads", model->n_threads()},
                            {"context", n},
                            {"verify", std::move(verify)},
                            {"decode", std::move(decode)}};
    if (dspark) {
      doc["dspark_pass"] = boost::json::object{{"seconds_median", dspark_spread.median},
                                               {"seconds_min", dspark_spread.min},
                                               {"seconds_max", dspark_spread.max},
                                               {"cost_ratio", dspark_spread.median / spread[0].median}};
    }
    out << boost::json::serialize(doc) << "\n";
    return {};
  }
  out << fmt::format("{} on {} ({} threads), context {} tokens, {} steps x {} repetitions\n\n", options.model_dir,
                     model->backend_name(), model->n_threads(), n, options.steps, options.repetitions);
  out << fmt::format("{:>6} | {:>9} {:>19} | {:>6} | {:>10} {:>10} | {:>10}\n", "drafts", "ms/step", "(min..max)", "cost",
                     "x at a=.5", "x at a=.8", "break-even");
  for (int64_t k = 0; k <= kMaxDraft; ++k) {
    const Spread& s = spread[static_cast<size_t>(k)];
    const double ratio = s.median / spread[0].median;
    out << fmt::format("{:>6} | {:>9.3f} {:>19} | {:>5.2f}x | {:>10.2f} {:>10.2f} | {:>10}\n", k, 1e3 * s.median,
                       fmt::format("({:.3f}..{:.3f})", 1e3 * s.min, 1e3 * s.max), ratio,
                       tokens_per_verify(0.5, k) / ratio, tokens_per_verify(0.8, k) / ratio,
                       k == 0 ? std::string("-") : fmt::format("a = {:.2f}", break_even(ratio, k)));
  }
  if (dspark) {
    out << fmt::format("DSpark pass (a block of {} drafts): {:.3f} ms ({:.3f}..{:.3f}), {:.2f}x a decode step\n",
                       model->text().dspark_block_size, 1e3 * dspark_spread.median, 1e3 * dspark_spread.min,
                       1e3 * dspark_spread.max, dspark_spread.median / spread[0].median);
  }
  out << fmt::format("\ngreedy, {} tokens each, the same tokens in every run:\n{:>15} | {:>9} {:>7} | {:>7} {:>8} {:>8} | {}\n",
                     options.generate, "drafts", "tokens/s", "speedup", "drafted", "accepted", "tok/step",
                     "acceptance per slot");
  for (const DecodeRun& r : runs) {
    std::string per_slot;
    for (size_t j = 0; j < r.counts.drafted_at.size(); ++j) {
      per_slot += r.counts.drafted_at[j] == 0 ? "   -" : fmt::format(" {:.2f}", r.slot_acceptance(j));
    }
    out << fmt::format("{:>15} | {:>9.1f} {:>6.2f}x | {:>7} {:>8} {:>8.2f} |{}\n", r.name, r.tokens_per_s(),
                       r.tokens_per_s() / plain_tps, r.counts.drafted, r.counts.accepted, r.tokens_per_verify(), per_slot);
  }
  return {};
}

}  // namespace

void add_bench_speculative_command(CLI::App& bench, Invocation& inv) {
  auto options = std::make_shared<SpeculativeBenchOptions>();
  CLI::App* cmd = bench.add_subcommand("speculative", "What a verify forward of drafts costs against a decode step, "
                                                      "and greedy decoding with and without drafts (context, DSpark, both)");
  cmd->alias("spec");
  cmd->add_option("--model", options->model_dir, "Checkpoint directory (hippo model init writes one)")->required();
  cmd->add_option("--context", options->context, "Context in tokens before the decode steps (1024, 32K)")
      ->capture_default_str();
  cmd->add_option("--transcript", options->transcript,
                  "A text file (an agent transcript) whose tokens are the context instead of --context synthetic ones")
      ->check(CLI::ExistingFile);
  cmd->add_option("--steps", options->steps, "Timed steps per draft length and repetition")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--repetitions", options->repetitions, "Timed runs per draft length after one warm-up")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--generate", options->generate, "Greedy tokens of the end-to-end comparison")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  add_engine_threads_option(*cmd, options->threads);
  add_backend_option(*cmd, options->backend);
  cmd->add_flag("--json", options->json, "One JSON object instead of a table");
  cmd->parse_complete_callback([&inv, options] {
    inv.action = [&inv, options] { return run_speculative_bench(*options, *inv.out); };
  });
}

}  // namespace hippo::cli
