// Helpers shared by the fuzz targets: comparing the agents layer's types, and the checks every
// parser's output must pass whichever wire format it came from.
#pragma once

#include "agents/agent_types.h"
#include "engine/tokenizer/python_json.h"
#include "tests/fuzz/fuzz_check.h"

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hippo::fuzz {

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return size == 0 ? std::string_view() : std::string_view(reinterpret_cast<const char*>(data), size);
}

// text is one JSON value (what every body and event hippo sends must be); returns it.
inline boost::json::value parse_json_or_die(std::string_view text, std::string_view what) {
  boost::system::error_code ec;
  boost::json::value value = boost::json::parse(text, ec);
  HIPPO_FUZZ_CHECK(!ec, std::string(what) + " is not JSON (" + ec.message() + "): " + std::string(text));
  return value;
}

// Equal to within a few units in the last place: Boost.JSON 1.81's parser does not round every
// number correctly (it reads the literal 105340232221128654843 as 1.0534023222112864e20, not the
// nearest double ...65e20), so parse(serialize(x)) can be x +- 1 ulp; no client can tell.
inline bool same_double(double a, double b) {
  if (a == b || (std::isnan(a) && std::isnan(b))) return true;
  return std::abs(a - b) <= 4 * std::numeric_limits<double>::epsilon() * std::max(std::abs(a), std::abs(b));
}

// Two JSON values alike, doubles compared as same_double() does.
inline bool same_json(const boost::json::value& a, const boost::json::value& b) {
  if (a.kind() != b.kind()) return false;
  if (a.is_double()) return same_double(a.get_double(), b.get_double());
  if (a.is_array()) {
    const boost::json::array& x = a.get_array();
    const boost::json::array& y = b.get_array();
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i)
      if (!same_json(x[i], y[i])) return false;
    return true;
  }
  if (a.is_object()) {
    const boost::json::object& x = a.get_object();
    const boost::json::object& y = b.get_object();
    if (x.size() != y.size()) return false;
    for (auto i = x.begin(), j = y.begin(); i != x.end(); ++i, ++j)
      if (i->key() != j->key() || !same_json(i->value(), j->value())) return false;
    return true;
  }
  return a == b;
}

// A tool's parameters: the same text, or JSON texts alike (a number in a schema can come back
// 1 ulp off, as in same_double()).
inline bool same_schema(const std::optional<std::string>& a, const std::optional<std::string>& b) {
  if (a == b) return true;
  if (!a || !b) return false;
  boost::system::error_code ec_a, ec_b;
  const boost::json::value x = boost::json::parse(*a, ec_a);
  const boost::json::value y = boost::json::parse(*b, ec_b);
  return !ec_a && !ec_b && same_json(x, y);
}

inline bool same_tools(const tokenizer::ToolDefinition& a, const tokenizer::ToolDefinition& b) {
  return a.name == b.name && a.description == b.description && same_schema(a.parameters, b.parameters);
}

inline bool same_settings(const agents::SessionSettings& a, const agents::SessionSettings& b) {
  if (a.instructions != b.instructions || a.tool_choice != b.tool_choice || a.thinking != b.thinking ||
      a.effort != b.effort || a.tools.size() != b.tools.size())
    return false;
  for (size_t i = 0; i < a.tools.size(); ++i)
    if (!same_tools(a.tools[i], b.tools[i])) return false;
  return true;
}

inline bool same_items(const std::vector<agents::InputItem>& a, const std::vector<agents::InputItem>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].kind != b[i].kind || a[i].content != b[i].content || a[i].tool_call_id != b[i].tool_call_id ||
        a[i].reasoning != b[i].reasoning || a[i].tool_calls.size() != b[i].tool_calls.size())
      return false;
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t j = 0; j < a[i].tool_calls.size(); ++j) {
      const tokenizer::ToolCall &x = a[i].tool_calls[j], &y = b[i].tool_calls[j];
      if (x.id != y.id || x.name != y.name || x.arguments != y.arguments) return false;
    }
  return true;
}

inline bool same_options(const agents::ResponseOptions& a, const agents::ResponseOptions& b) {
  return same_double(a.sampling.temperature, b.sampling.temperature) && a.sampling.top_k == b.sampling.top_k &&
         same_double(a.sampling.top_p, b.sampling.top_p) && same_double(a.sampling.min_p, b.sampling.min_p) &&
         a.sampling.seed == b.sampling.seed && a.max_output_tokens == b.max_output_tokens && a.stop == b.stop &&
         a.top_logprobs == b.top_logprobs && a.parallel_tool_calls == b.parallel_tool_calls;
}

// What every accepted request's settings must satisfy: a tool's parameters are a JSON object's
// text that the chat encoding can render (into the prompt's tools section), and the settings
// survive the sessions table (settings_to_json, then settings_from_json).
inline void check_settings(const agents::SessionSettings& settings) {
  for (const tokenizer::ToolDefinition& tool : settings.tools) {
    if (tool.parameters) {
      const boost::json::value schema = parse_json_or_die(*tool.parameters, "a tool's parameters");
      HIPPO_FUZZ_CHECK(schema.is_object(), "a tool's parameters are not an object: " + *tool.parameters);
      const Result<std::string> rendered = tokenizer::to_python_json(*tool.parameters);
      HIPPO_FUZZ_CHECK(rendered.ok(), "a tool's parameters do not render (" + rendered.status().to_string() +
                                          "): " + *tool.parameters);
    }
  }
  const std::string stored = agents::settings_to_json(settings);
  Result<agents::SessionSettings> loaded = agents::settings_from_json(stored);
  HIPPO_FUZZ_CHECK(loaded.ok(), "settings_from_json fails on settings_to_json's output: " + stored + ": " +
                                    (loaded.ok() ? std::string() : loaded.status().to_string()));
  HIPPO_FUZZ_CHECK(same_settings(settings, *loaded), "settings differ after the sessions table: " + stored);
}

}  // namespace hippo::fuzz
