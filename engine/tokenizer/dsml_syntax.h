// The DSML tool-call markup of DeepSeek V4 and V4.1, shared by the chat encoder (which writes it into
// prompts) and the stream parser (which reads it from completions).
//
// V4 (encoding_dsv4):            <｜DSML｜tool_calls> <｜DSML｜invoke name="…"> <｜DSML｜parameter name="…" string="true|false">
// V4.1 (DeepSeek's deepseek-recipe, DeepseekV41Encoding): the same with "｜DSML｜ calls", "｜DSML｜ invoke",
// "｜DSML｜ parameter" (a space after the marker). "｜DSML｜" (U+FF5C bars) is one added token, id 128825.
#pragma once

#include <string_view>

namespace hippo::tokenizer {

enum class ModelFamily { kV4, kV41 };

struct DsmlSyntax {
  std::string_view block_open;    // then "\n"
  std::string_view block_close;
  std::string_view invoke_open;   // then NAME">\n
  std::string_view invoke_close;  // then "\n"
  std::string_view param_open;    // then NAME" string="true|false">VALUE
  std::string_view param_close;   // then "\n"
};

inline constexpr std::string_view kDsmlToken = "｜DSML｜";
// The reasoning span around DSML blocks: "<think>…</think>", written by the encoder, split off by the parser.
inline constexpr std::string_view kThinkStart = "<think>";
inline constexpr std::string_view kThinkEnd = "</think>";

inline constexpr DsmlSyntax kDsmlV4{
    "<｜DSML｜tool_calls>", "</｜DSML｜tool_calls>", "<｜DSML｜invoke name=\"",
    "</｜DSML｜invoke>",    "<｜DSML｜parameter name=\"", "</｜DSML｜parameter>",
};
inline constexpr DsmlSyntax kDsmlV41{
    "<｜DSML｜ calls>", "</｜DSML｜ calls>", "<｜DSML｜ invoke name=\"",
    "</｜DSML｜ invoke>", "<｜DSML｜ parameter name=\"", "</｜DSML｜ parameter>",
};

inline const DsmlSyntax& dsml_syntax(ModelFamily family) { return family == ModelFamily::kV4 ? kDsmlV4 : kDsmlV41; }

}  // namespace hippo::tokenizer
