// Reading of the reference fixtures (see chat_fixtures.h).
#include "tests/engine/tokenizer/chat_fixtures.h"

#include "tests/engine/tokenizer/test_data.h"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <catch2/catch.hpp>

namespace hippo::tokenizer::testing {
namespace {

namespace json = boost::json;

std::string str(const json::value& v, std::string_view key) {
  const json::value* m = v.as_object().if_contains(key);
  return m && m->is_string() ? std::string(m->get_string()) : std::string();
}

std::optional<std::string> opt_str(const json::value& v, std::string_view key) {
  const json::value* m = v.as_object().if_contains(key);
  if (m == nullptr || m->is_null()) return std::nullopt;
  return std::string(m->as_string());
}

ModelFamily family(const json::value& v) { return str(v, "family") == "v4" ? ModelFamily::kV4 : ModelFamily::kV41; }

Message message(const json::value& v) {
  static const std::pair<std::string_view, Role> kRoles[] = {{"system", Role::kSystem},
                                                             {"user", Role::kUser},
                                                             {"assistant", Role::kAssistant},
                                                             {"tool", Role::kTool},
                                                             {"latest_reminder", Role::kLatestReminder}};
  Message m;
  const std::string role = str(v, "role");
  for (const auto& [name, r] : kRoles) {
    if (name == role) m.role = r;
  }
  m.content = str(v, "content");
  m.reasoning = opt_str(v, "reasoning");
  m.tool_call_id = str(v, "tool_call_id");
  if (const json::value* n = v.as_object().if_contains("n_images")) m.n_images = static_cast<std::size_t>(n->as_int64());
  if (const json::value* calls = v.as_object().if_contains("tool_calls")) {
    for (const json::value& c : calls->as_array()) m.tool_calls.push_back({str(c, "id"), str(c, "name"), str(c, "arguments")});
  }
  if (const json::value* prefix = v.as_object().if_contains("prefix")) m.prefix = prefix->as_bool();
  return m;
}

ChatFixture chat(const json::value& v) {
  ChatFixture f;
  f.name = str(v, "name");
  f.options.family = family(v);
  f.options.thinking = v.at("thinking").as_bool();
  const std::optional<std::string> effort = opt_str(v, "effort");
  if (effort == "low") f.options.effort = ReasoningEffort::kLow;
  if (effort == "high") f.options.effort = ReasoningEffort::kHigh;
  if (effort == "xhigh") f.options.effort = ReasoningEffort::kXHigh;
  if (effort == "max") f.options.effort = ReasoningEffort::kMax;
  for (const json::value& t : v.at("tools").as_array()) {
    ToolDefinition tool{str(t, "name"), opt_str(t, "description"), std::nullopt};
    if (const json::value* p = t.as_object().if_contains("parameters")) tool.parameters = json::serialize(*p);
    f.options.tools.push_back(std::move(tool));
  }
  const std::string choice = str(v, "tool_choice");
  f.options.tool_choice = choice == "none" ? ToolChoice::kNone : choice == "required" ? ToolChoice::kRequired : ToolChoice::kAuto;
  const json::value& rf = v.at("response_format");
  const std::string kind = str(rf, "kind");
  if (kind == "json_object") f.options.response_format.kind = ResponseFormat::Kind::kJsonObject;
  if (kind == "json_schema") {
    f.options.response_format.kind = ResponseFormat::Kind::kJsonSchema;
    f.options.response_format.schema = json::serialize(rf.at("schema"));
  }
  for (const json::value& m : v.at("messages").as_array()) f.messages.push_back(message(m));
  f.prompt = str(v, "prompt");
  if (!v.at("ids").is_null()) {
    std::vector<TokenId> ids;
    for (const json::value& id : v.at("ids").as_array()) ids.push_back(static_cast<TokenId>(id.as_int64()));
    f.ids = std::move(ids);
  }
  return f;
}

CompletionFixture completion(const json::value& v) {
  CompletionFixture f{str(v, "name"), family(v), v.at("thinking").as_bool(), str(v, "completion"),
                      str(v, "reasoning"), str(v, "content"), str(v, "raw_tool_calls"), {}};
  for (const json::value& c : v.at("tool_calls").as_array()) f.tool_calls.push_back({str(c, "name"), str(c, "arguments")});
  return f;
}

}  // namespace

const Fixtures& chat_fixtures() {
  static const Fixtures fixtures = [] {
    Fixtures f;
    const std::string text = read_file(golden_file("chat_fixtures.json"));
    boost::system::error_code ec;
    const json::value doc = json::parse(text, ec);
    if (ec) return f;
    for (const json::value& c : doc.at("chat").as_array()) f.chats.push_back(chat(c));
    for (const json::value& c : doc.at("completions").as_array()) f.completions.push_back(completion(c));
    return f;
  }();
  REQUIRE(!fixtures.chats.empty());
  return fixtures;
}

}  // namespace hippo::tokenizer::testing
