// Test fixture for the end-to-end tests of the tool-call flow (tests/e2e/test_examples.py and
// test_chat.py): writes a session in which the model answered a user message with tool calls, through
// the real store and chat encoder, as the runtime logs one (tests/agents/runtime_test.cpp, "tool
// calls"). The tiny random checkpoints of the tests do not call tools by themselves; a server opened
// on this database resumes the session awaiting the calls' results (call_0, call_1, ...), and takes
// them as `tool_result` items. Usage:
//   make_tool_session MODEL_DIR DB SESSION_ID TOOLS_JSON MESSAGE NAME ARGUMENTS_JSON [NAME ARGUMENTS_JSON]...
// TOOLS_JSON is the `tools` array of session.create ([{"name", "description"?, "parameters"?}]);
// ARGUMENTS_JSON a JSON object, written as the model writes one (strings as string="true").
#include "agents/agent_types.h"
#include "agents/response_job.h"
#include "engine/model/model.h"
#include "engine/tokenizer/chat_encoding.h"
#include "engine/tokenizer/dsml_syntax.h"
#include "engine/tokenizer/tokenizer.h"
#include "storage/store.h"

#include <boost/json.hpp>

#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

using namespace hippo;
namespace json = boost::json;

namespace {

int fail(const std::string& message) {
  std::cerr << "make_tool_session: " << message << "\n";
  return 1;
}

// The DSML block of the calls, "\n\n" before it, as chat_encoding.cpp writes an assistant's calls.
std::string dsml_calls(const tokenizer::DsmlSyntax& x, const std::vector<std::pair<std::string, json::object>>& calls) {
  std::string out = "\n\n" + std::string(x.block_open) + "\n";
  for (const auto& [name, arguments] : calls) {
    out += std::string(x.invoke_open) + name + "\">\n";
    for (const auto& [key, value] : arguments) {
      const bool is_string = value.is_string();
      out += std::string(x.param_open) + std::string(key) + (is_string ? "\" string=\"true\">" : "\" string=\"false\">");
      out += is_string ? std::string(value.get_string()) : json::serialize(value);
      out += std::string(x.param_close) + "\n";
    }
    out += std::string(x.invoke_close) + "\n";
  }
  return out + std::string(x.block_close);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 8 || (argc - 6) % 2 != 0) {
    std::cerr << "usage: make_tool_session MODEL_DIR DB SESSION_ID TOOLS_JSON MESSAGE NAME ARGUMENTS_JSON"
                 " [NAME ARGUMENTS_JSON]...\n";
    return 2;
  }
  const std::string model_dir = argv[1], db = argv[2], id = argv[3];
  agents::SessionSettings settings;
  try {
    const json::value tools = json::parse(argv[4]);
    for (const json::value& t : tools.as_array()) {
      const json::object& o = t.as_object();
      tokenizer::ToolDefinition def;
      def.name = std::string(o.at("name").as_string());
      if (const json::value* d = o.if_contains("description")) def.description = std::string(d->as_string());
      if (const json::value* p = o.if_contains("parameters")) def.parameters = json::serialize(*p);
      settings.tools.push_back(std::move(def));
    }
  } catch (const std::exception& e) {
    return fail(std::string("TOOLS_JSON: ") + e.what());
  }
  std::vector<std::pair<std::string, json::object>> calls;
  for (int i = 6; i + 1 < argc; i += 2) {
    try {
      calls.emplace_back(argv[i], json::parse(argv[i + 1]).as_object());
    } catch (const std::exception& e) {
      return fail(std::string("ARGUMENTS_JSON of ") + argv[i] + ": " + e.what());
    }
  }

  auto model = engine::Model::load(model_dir);
  if (!model.ok()) return fail(model.status().to_string());
  auto tok = tokenizer::Tokenizer::load(std::filesystem::path(model_dir) / "tokenizer.json");
  if (!tok.ok()) return fail(tok.status().to_string());
  auto store = storage::SessionStore::open(db);
  if (!store.ok()) return fail(store.status().to_string());
  auto created = (*store)->create_session({id, std::nullopt, (*model)->fingerprint(), agents::settings_to_json(settings)});
  if (!created.ok()) return fail(created.status().to_string());

  tokenizer::ChatOptions options;
  options.family = agents::chat_family(*tok);
  options.tools = settings.tools;
  options.thinking = settings.thinking;
  tokenizer::ChatEncoder encoder(*tok, options);
  tokenizer::Message user;
  user.content = argv[5];
  auto prompt = encoder.encode_chat_suffix(std::vector{user}, true);
  if (!prompt.ok()) return fail(prompt.status().to_string());

  storage::MessageRecord u;
  u.role = "user";
  u.content = user.content;
  storage::MessageRecord p;
  p.role = "prompt";
  p.token_ids = prompt->ids;
  p.n_tokens = static_cast<int64_t>(p.token_ids.size());
  storage::MessageRecord a;
  a.role = "assistant";
  a.tool_calls = dsml_calls(tokenizer::dsml_syntax(options.family), calls);
  a.content = "Let me use my tools." + a.tool_calls;
  a.first_token = p.n_tokens;
  a.token_ids = tok->encode(a.content);
  a.token_ids.push_back(static_cast<int32_t>((*model)->config().eos_token_id));
  a.n_tokens = static_cast<int64_t>(a.token_ids.size());
  for (const storage::MessageRecord* m : {&u, &p, &a}) {
    auto seq = (*store)->append_message(id, *m);
    if (!seq.ok()) return fail(seq.status().to_string());
  }
  return 0;
}
