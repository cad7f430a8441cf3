// `hippo run [--model DIR] --prompt TEXT | --prompt-file FILE`: one generation from the command line,
// on the embedded default model (default_model.h) unless --model names a checkpoint.
// The prompt is rendered as a one-message chat (or taken as raw text with --raw), prefilled through
// the encoder/decoder plan with a progress line on stderr, and the answer is streamed to stdout.
#include "api/cli/cli.h"
#include "api/cli/clock.h"
#include "api/cli/default_model.h"
#include "base/log.h"
#include "engine/model/model.h"
#include "engine/sampling/sampler.h"
#include "engine/speculative/decode_loop.h"
#include "engine/tokenizer/chat_encoding.h"
#include "engine/tokenizer/incremental_detokenizer.h"
#include "engine/tokenizer/tokenizer.h"
#include "kernels/backend_registry.h"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

namespace hippo::cli {
namespace {

struct RunCommand {
  std::string model_dir;
  std::string tokenizer_dir = default_tokenizer_dir();
  std::string prompt;
  std::string prompt_file;
  bool raw = false;
  bool thinking = false;
  int64_t max_tokens = 128;
  engine::SamplingParams sampling;
  int threads = 0;
  std::string backend = kernels::kDefaultBackend;
  int64_t chunk = 2048;
  std::string speculative = "auto";
};

Result<std::vector<int32_t>> prompt_tokens(const RunCommand& cmd, const tokenizer::Tokenizer& tok) {
  std::string text = cmd.prompt;
  if (!cmd.prompt_file.empty()) {
    std::ifstream in(cmd.prompt_file, std::ios::binary);
    if (!in) return Status(ErrorCode::kNotFound, fmt::format("--prompt-file {}: cannot be read", cmd.prompt_file));
    std::ostringstream bytes;
    bytes << in.rdbuf();
    text = bytes.str();
  }
  if (cmd.raw) return tok.encode(text);
  tokenizer::Message message;
  message.role = tokenizer::Role::kUser;
  message.content = text;
  tokenizer::ChatOptions options;
  options.thinking = cmd.thinking;
  HIPPO_ASSIGN_OR_RETURN(tokenizer::RenderedPrompt rendered, tokenizer::render_chat(std::span(&message, 1), options));
  return tokenizer::encode_prompt(tok, rendered);
}

Status run_generation(RunCommand cmd, std::ostream& out) {
  if (cmd.model_dir.empty()) {
    HIPPO_ASSIGN_OR_RETURN(cmd.model_dir, ensure_default_model(cmd.tokenizer_dir));
  }
  const auto load_start = std::chrono::steady_clock::now();
  engine::ModelOptions options;
  options.n_threads = cmd.threads;
  options.backend = cmd.backend;
  HIPPO_ASSIGN_OR_RETURN(std::unique_ptr<engine::Model> model, engine::Model::load(cmd.model_dir, options));
  HIPPO_ASSIGN_OR_RETURN(const std::optional<engine::DraftMode> drafts, draft_mode(cmd.speculative, *model));
  HIPPO_ASSIGN_OR_RETURN(tokenizer::Tokenizer tokenizer,
                         tokenizer::Tokenizer::load(std::filesystem::path(cmd.model_dir) / "tokenizer.json"));
  log::info("model loaded", {{"dir", cmd.model_dir},
                             {"seconds", fmt::format("{:.2f}", seconds_since(load_start))},
                             {"backend", model->backend_name()},
                             {"threads", std::to_string(model->n_threads())},
                             {"mapped_bytes", std::to_string(model->checkpoint().mapped_bytes())},
                             {"resident_bytes", std::to_string(model->checkpoint().resident_bytes())}});
  HIPPO_ASSIGN_OR_RETURN(std::vector<int32_t> ids, prompt_tokens(cmd, tokenizer));
  if (ids.empty()) return Status(ErrorCode::kInvalidArgument, "the prompt is empty");

  engine::SessionState state = model->new_session();
  const auto prefill_start = std::chrono::steady_clock::now();
  const bool show_progress = static_cast<int64_t>(ids.size()) > cmd.chunk;
  engine::PrefillOptions prefill;
  prefill.chunk_tokens = cmd.chunk;
  prefill.progress = [&](int64_t done, int64_t total) {
    if (!show_progress) return;
    std::cerr << fmt::format("\rprefill {}/{} tokens ({:.0f}%, {:.0f} tokens/s)", done, total,
                             100.0 * static_cast<double>(done) / static_cast<double>(total),
                             static_cast<double>(done) / seconds_since(prefill_start))
              << (done == total ? "\n" : "") << std::flush;
  };
  HIPPO_RETURN_IF_ERROR(model->prefill(state, ids, prefill));
  const double prefill_seconds = seconds_since(prefill_start);

  engine::Sampler sampler(cmd.sampling);
  tokenizer::IncrementalDetokenizer detokenizer(tokenizer);
  const auto decode_start = std::chrono::steady_clock::now();
  std::string text;
  // Each token into the output; EOS ends it.
  auto take = [&](int32_t token) {
    if (token == model->config().eos_token_id) return false;
    text.clear();
    detokenizer.push(token, text);
    out << text << std::flush;
    return true;
  };
  HIPPO_ASSIGN_OR_RETURN(const engine::DecodeCounts counts,
                         engine::decode_tokens(*model, state, sampler,
                                               drafts ? engine::session_draft_source(*model, state, *drafts)
                                                      : engine::DraftSource{},
                                               cmd.max_tokens, take));
  text.clear();
  detokenizer.finish(text);
  out << text << "\n";
  const double decode_seconds = seconds_since(decode_start);
  std::cerr << fmt::format("prompt {} tokens in {:.2f} s ({:.1f} tokens/s); generated {} tokens in {:.2f} s ({:.1f} tokens/s); "
                           "drafted {}, accepted {}; seed {}\n",
                           ids.size(), prefill_seconds, static_cast<double>(ids.size()) / prefill_seconds,
                           counts.generated, decode_seconds, static_cast<double>(counts.generated) / decode_seconds,
                           counts.drafted, counts.accepted, sampler.seed());
  return Status::ok_status();
}

}  // namespace

void add_run_command(CLI::App& app, Invocation& inv) {
  auto cmd = std::make_shared<RunCommand>();
  CLI::App* run = app.add_subcommand("run", "Generate from a prompt on the command line");
  run->add_option("--model", cmd->model_dir,
                  "Checkpoint directory (config.json, shards, tokenizer.json); default: the embedded default model "
                  "(the trained demo model) in models/default");
  run->add_option("--tokenizer", cmd->tokenizer_dir, "Directory holding tokenizer.json, for the embedded default model")
      ->capture_default_str();
  auto* prompt = run->add_option("--prompt", cmd->prompt, "The prompt text");
  auto* file = run->add_option("--prompt-file", cmd->prompt_file, "Read the prompt from this file");
  prompt->excludes(file);
  run->add_flag("--raw", cmd->raw, "Tokenize the prompt as it is instead of rendering it as a chat message");
  run->add_flag("--thinking", cmd->thinking, "Chat in thinking mode (the answer starts with reasoning)");
  run->add_option("--max-tokens", cmd->max_tokens, "Stop after this many generated tokens")->check(CLI::PositiveNumber)->capture_default_str();
  run->add_option("--temperature", cmd->sampling.temperature, "0 = greedy")->check(CLI::NonNegativeNumber)->capture_default_str();
  run->add_option("--top-k", cmd->sampling.top_k, "Sample among the k most likely (0 = off)")->check(CLI::NonNegativeNumber);
  run->add_option("--top-p", cmd->sampling.top_p, "Nucleus sampling mass (1 = off)")->check(CLI::Range(0.0, 1.0));
  run->add_option("--min-p", cmd->sampling.min_p, "Drop tokens below min-p times the best (0 = off)")->check(CLI::Range(0.0, 1.0));
  run->add_option("--seed", cmd->sampling.seed, "Sampling seed (default: one drawn at random, printed at the end)");
  add_engine_threads_option(*run, cmd->threads);
  add_backend_option(*run, cmd->backend);
  add_speculative_option(*run, cmd->speculative);
  run->add_option("--chunk", cmd->chunk, "Prefill chunk in tokens")->check(CLI::PositiveNumber)->capture_default_str();
  run->parse_complete_callback([&inv, cmd, prompt, file] {
    inv.action = [&inv, cmd, prompt, file]() -> Status {
      if (prompt->count() == 0 && file->count() == 0) {
        return Status(ErrorCode::kInvalidArgument, "hippo run: give --prompt or --prompt-file");
      }
      return run_generation(*cmd, *inv.out);
    };
  });
}

}  // namespace hippo::cli
