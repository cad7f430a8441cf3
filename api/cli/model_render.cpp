// `hippo model render`: finished conversations (JSON lines in the chat completions request form, each
// ending with the assistant's answer) -> their token ids as a live session holds them, and which ids
// the model generated. Training data comes from here (scripts/gen_agent_corpus.py), so a model is
// trained on exactly the rendering that serving gives it (agents/session_render.h).
#include "agents/session_render.h"
#include "api/cli/cli.h"
#include "api/server/openai_chat.h"
#include "engine/tokenizer/tokenizer.h"

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <istream>
#include <memory>
#include <ostream>

namespace hippo::cli {
namespace {

namespace fs = std::filesystem;

struct RenderCommand {
  std::string tokenizer;
  std::string in = "-";
};

// {"ids": [...], "answers": [[begin, end], ...]}
std::string rendered_json(const agents::RenderedSession& rendered) {
  boost::json::array ids;
  ids.reserve(rendered.ids.size());
  for (int32_t id : rendered.ids) ids.push_back(id);
  boost::json::array answers;
  for (const agents::RenderedSession::Span& a : rendered.answers)
    answers.push_back(boost::json::array{a.begin, a.end});
  return boost::json::serialize(boost::json::object{{"ids", std::move(ids)}, {"answers", std::move(answers)}});
}

Status run_render(const RenderCommand& command, std::ostream& out) {
  fs::path tokenizer_path = command.tokenizer;
  if (fs::is_directory(tokenizer_path)) tokenizer_path /= "tokenizer.json";
  HIPPO_ASSIGN_OR_RETURN(tokenizer::Tokenizer tokenizer, tokenizer::Tokenizer::load(tokenizer_path));
  std::ifstream file;
  if (command.in != "-") {
    file.open(command.in);
    if (!file) return make_error(ErrorCode::kNotFound, "cannot read {}", command.in);
  }
  std::istream& in = command.in == "-" ? std::cin : file;
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    Result<server::openai::ChatRequest> conversation = server::openai::parse_chat_transcript(line);
    if (!conversation.ok())
      return make_error(ErrorCode::kInvalidArgument, "{} line {}: {}", command.in, n, conversation.status().message());
    Result<agents::RenderedSession> rendered =
        agents::render_session(tokenizer, conversation->settings, conversation->inputs);
    if (!rendered.ok())
      return make_error(ErrorCode::kInvalidArgument, "{} line {}: {}", command.in, n, rendered.status().message());
    out << rendered_json(*rendered) << "\n";
  }
  if (in.bad()) return make_error(ErrorCode::kIoError, "reading {} failed", command.in);
  return {};
}

}  // namespace

void add_model_render_command(CLI::App& model, Invocation& inv) {
  auto render = std::make_shared<RenderCommand>();
  CLI::App* cmd = model.add_subcommand(
      "render", "Render finished conversations (JSON lines) to token ids, marking the ids the model generated");
  cmd->add_option("--tokenizer", render->tokenizer, "A checkpoint directory, or a tokenizer.json")->required();
  cmd->add_option("--in", render->in, "JSON lines, each a chat completions request whose messages end with the "
                                      "assistant's answer; - for stdin")
      ->capture_default_str();
  cmd->parse_complete_callback([&inv, render] {
    inv.action = [&inv, render] { return run_render(*render, *inv.out); };
  });
}

}  // namespace hippo::cli
