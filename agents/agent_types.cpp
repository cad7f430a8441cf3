#include "agents/agent_types.h"

#include <boost/json.hpp>
#include <fmt/format.h>

namespace hippo::agents {
namespace json = boost::json;

std::string_view status_name(SessionStatus status) {
  switch (status) {
    case SessionStatus::kReady: return "ready";
    case SessionStatus::kRunning: return "running";
    case SessionStatus::kAwaitingTool: return "awaiting_tool";
    case SessionStatus::kSwapped: return "swapped";
    case SessionStatus::kClosed: return "closed";
  }
  return "unknown";
}

namespace {

constexpr std::string_view kChoices[] = {"auto", "none", "required"};
constexpr std::string_view kEfforts[] = {"default", "low", "high", "xhigh", "max"};

template <size_t N>
Result<int> index_of(const std::string_view (&names)[N], std::string_view name, std::string_view what) {
  for (size_t i = 0; i < N; ++i) {
    if (names[i] == name) return static_cast<int>(i);
  }
  return Status(ErrorCode::kInvalidArgument, fmt::format("session settings: unknown {} '{}'", what, name));
}

}  // namespace

std::string settings_to_json(const SessionSettings& settings) {
  json::array tools;
  for (const tokenizer::ToolDefinition& tool : settings.tools) {
    json::object t{{"name", tool.name}};
    if (tool.description) t["description"] = *tool.description;
    if (tool.parameters) t["parameters"] = *tool.parameters;
    tools.push_back(std::move(t));
  }
  return json::serialize(json::object{{"instructions", settings.instructions},
                                      {"tools", std::move(tools)},
                                      {"tool_choice", kChoices[static_cast<int>(settings.tool_choice)]},
                                      {"thinking", settings.thinking},
                                      {"effort", kEfforts[static_cast<int>(settings.effort)]}});
}

Result<SessionSettings> settings_from_json(std::string_view text) {
  boost::system::error_code ec;
  const json::value value = json::parse(text, ec);
  if (ec || !value.is_object()) {
    return Status(ErrorCode::kCorrupt, fmt::format("session settings: not a JSON object: {}", text.substr(0, 80)));
  }
  const json::object& o = value.as_object();
  SessionSettings settings;
  try {
    if (const auto* v = o.if_contains("instructions")) settings.instructions = json::value_to<std::string>(*v);
    if (const auto* v = o.if_contains("tools")) {
      for (const json::value& t : v->as_array()) {
        tokenizer::ToolDefinition tool;
        tool.name = json::value_to<std::string>(t.at("name"));
        if (const auto* d = t.as_object().if_contains("description")) tool.description = json::value_to<std::string>(*d);
        if (const auto* p = t.as_object().if_contains("parameters")) tool.parameters = json::value_to<std::string>(*p);
        settings.tools.push_back(std::move(tool));
      }
    }
    if (const auto* v = o.if_contains("thinking")) settings.thinking = v->as_bool();
    if (const auto* v = o.if_contains("tool_choice")) {
      HIPPO_ASSIGN_OR_RETURN(int i, index_of(kChoices, v->as_string(), "tool_choice"));
      settings.tool_choice = static_cast<tokenizer::ToolChoice>(i);
    }
    if (const auto* v = o.if_contains("effort")) {
      HIPPO_ASSIGN_OR_RETURN(int i, index_of(kEfforts, v->as_string(), "effort"));
      settings.effort = static_cast<tokenizer::ReasoningEffort>(i);
    }
  } catch (const std::exception& e) {
    return Status(ErrorCode::kCorrupt, fmt::format("session settings: {}", e.what()));
  }
  return settings;
}

}  // namespace hippo::agents
