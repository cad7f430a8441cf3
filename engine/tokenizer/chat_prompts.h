// The fixed prompt texts of DeepSeek's chat encodings, byte for byte as DeepSeek's reference encoder
// (PyPI deepseek-recipe 0.2.0, DeepseekV4Encoding / DeepseekV41Encoding) writes them. They are part
// of the model's input format, like the special tokens; docs/tokenizer.md names the reference.
// "<think>", "</think>" and "｜DSML｜" inside them are special tokens (chat_encoding.cpp).
#pragma once

#include <string_view>

namespace hippo::tokenizer::prompts {

// V4 thinking mode, reasoning effort high (also the default and "xhigh") and max.
inline constexpr std::string_view kV4EffortHigh =
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
    "You MUST be very thorough in your thinking and comprehensively decompose the problem to resolve the root "
    "cause, rigorously stress-testing your logic against all potential paths, edge cases, and adversarial "
    "scenarios.\n"
    "Explicitly write out your entire deliberation process, documenting every intermediate step, considered "
    "alternative, and rejected hypothesis to ensure absolutely no assumption is left unchecked.";
inline constexpr std::string_view kV4EffortMax =
    "Reasoning Effort: Beyond maximum — exhaustive, relentless, and uncompromising.\n"
    "You MUST reason with the utmost depth and rigor, leaving absolutely nothing to chance: exhaustively "
    "decompose the problem into its most fundamental components, trace every causal chain to its root, and "
    "resolve the underlying cause rather than any surface symptom.\n"
    "Do not stop reasoning until you have independently verified the solution from multiple angles and are "
    "certain that no assumption remains unchecked and no error remains undiscovered.";

// V4.1 thinking mode: an integer budget; low = 50, default/high/xhigh = 75, max = 100.
inline constexpr std::string_view kV41EffortFormat =
    "Reasoning Effort: {} (range 1-100, the higher the value, the more thorough the reasoning)";

// The tools section; {0} is the block tag ("tool_calls" in V4, " calls" in V4.1), {1} the invoke tag,
// {2} the parameter tag, {3} the schema lines.
inline constexpr std::string_view kToolsFormat =
    "## Tools\n\n"
    "You have access to a set of tools to help answer the user's question. You can invoke tools by writing a "
    "\"<｜DSML｜{0}>\" block like the following:\n\n"
    "<｜DSML｜{0}>\n"
    "<｜DSML｜{1} name=\"$TOOL_NAME\">\n"
    "<｜DSML｜{2} name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</｜DSML｜{2}>\n"
    "...\n"
    "</｜DSML｜{1}>\n"
    "<｜DSML｜{1} name=\"$TOOL_NAME2\">\n"
    "...\n"
    "</｜DSML｜{1}>\n"
    "</｜DSML｜{0}>\n\n"
    "String parameters should be specified as is and set `string=\"true\"`. For all other types (numbers, "
    "booleans, arrays, objects), pass the value in JSON format and set `string=\"false\"`.\n\n"
    "If thinking_mode is enabled (triggered by <think>), you MUST output your complete reasoning inside "
    "<think>...</think> BEFORE any tool calls or final response.\n\n"
    "Otherwise, output directly after </think> with tool calls or final response.\n\n"
    "### Available Tool Schemas\n\n"
    "{3}\n\n"
    "You MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.\n";

// Response formats. V4 has its own json_object text; V4.1 writes json_object as the schema
// {"type": "json_object"}.
inline constexpr std::string_view kV4JsonObject =
    "You are a helpful assistant designed to output JSON.\n## Response Format:\n\nReply with JSON object ONLY.";
inline constexpr std::string_view kJsonSchemaPrefix =
    "## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n";

}  // namespace hippo::tokenizer::prompts
