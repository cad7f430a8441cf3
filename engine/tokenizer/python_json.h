// JSON text in the layout that DeepSeek's reference encoder writes into prompts: Python
// json.dumps(ensure_ascii=False) style, ", " between items and ": " after keys, non-ASCII kept,
// control characters escaped. Used for tool schemas, non-string tool-call arguments and response
// schemas (chat_encoding.cpp), and for the arguments that the DSML parser reports.
//
// Numbers are copied as written: the references themselves disagree on float spellings (V4 writes
// 1e-05 as 0.00001, V4.1 as 1e-05; docs/tokenizer.md), and integers and plain decimals, which agents
// send, come out the same in both. Object keys keep their order.
#pragma once

#include "base/status.h"

#include <string>
#include <string_view>
#include <vector>

namespace hippo::tokenizer {

// Re-lays out one JSON value (an error names what is not JSON). Whitespace around it is ignored.
Result<std::string> to_python_json(std::string_view json);

// `utf8` as a JSON string literal in the same style (quotes included).
void append_python_json_string(std::string_view utf8, std::string& out);

// The members of a JSON object, for DSML parameters: a string member's value decoded (rendered as
// string="true"), any other value laid out as above (string="false"). An error if not an object.
struct JsonMember {
  std::string key;
  bool is_string = false;
  std::string value;
};
Result<std::vector<JsonMember>> json_object_members(std::string_view json);

}  // namespace hippo::tokenizer
