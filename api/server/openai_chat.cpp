#include "api/server/openai_chat.h"

#include "api/server/conversation_input.h"
#include "api/server/json_fields.h"
#include "engine/tokenizer/utf8.h"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <fmt/format.h>

#include <cmath>

namespace hippo::server::openai {

namespace json = boost::json;

namespace {

// A message's content: a string, or an array of {type:"text", text} parts.
Result<std::string> message_text(const json::value& content, const std::string& where) {
  if (content.is_string()) return std::string(content.get_string());
  if (content.is_null()) return std::string();
  if (!content.is_array())
    return invalid_request(fmt::format("{}.content must be a string or an array of text parts", where));
  std::string text;
  for (const json::value& part : content.get_array()) {
    const json::object* o = part.if_object();
    const json::value* type = o ? o->if_contains("type") : nullptr;
    const json::value* t = o ? o->if_contains("text") : nullptr;
    if (type == nullptr || !type->is_string() || type->get_string() != "text" || t == nullptr || !t->is_string())
      return invalid_request(
          fmt::format("{}.content: only text parts ({{\"type\": \"text\", \"text\": ...}}) are supported", where));
    text += t->get_string();
  }
  return text;
}

// An assistant message's tool_calls: [{id, type: "function", function: {name, arguments}}].
Status parse_tool_calls(const json::array& calls, ConversationInput& conversation, const std::string& where) {
  for (size_t j = 0; j < calls.size(); ++j) {
    const std::string at = fmt::format("{}.tool_calls[{}]", where, j);
    const json::object* c = calls[j].if_object();
    if (c == nullptr) return invalid_request(fmt::format("{} must be an object", at));
    JsonFields f(*c, at + ".");
    auto id = f.required_string("id");
    auto type = f.string("type");
    const json::object* function = f.object("function");
    if (!f.ok()) return invalid_request(f.error());
    if (type && *type != "function")
      return invalid_request(fmt::format("{}.type must be function, not '{}'", at, *type));
    if (function == nullptr) return invalid_request(fmt::format("{}.function is required", at));
    JsonFields ff(*function, at + ".function.");
    auto name = ff.required_string("name");
    auto arguments = ff.required_string("arguments");
    if (!ff.ok()) return invalid_request(ff.error());
    HIPPO_RETURN_IF_ERROR(conversation.call({*id, *name, *arguments}, where));
  }
  return Status::ok_status();
}

Status parse_messages(const json::array& messages, ChatRequest& r, ConversationInput::Ending ending) {
  if (messages.empty()) return invalid_request("messages must not be empty");
  ConversationInput conversation;
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string where = fmt::format("messages[{}]", i);
    if (!messages[i].is_object()) return invalid_request(fmt::format("{} must be an object", where));
    const json::object& m = messages[i].get_object();
    JsonFields f(m, where + ".");
    auto role = f.required_string("role");
    auto reasoning = f.string("reasoning_content");
    const json::array* tool_calls = f.array("tool_calls");
    auto tool_call_id = f.string("tool_call_id");
    auto prefix = f.boolean("prefix");
    if (!f.ok()) return invalid_request(f.error());
    const json::value* content = m.if_contains("content");
    static const json::value kNull;
    HIPPO_ASSIGN_OR_RETURN(std::string text, message_text(content ? *content : kNull, where));
    if (*role == "system" || *role == "developer") {
      HIPPO_RETURN_IF_ERROR(conversation.system(text, where));
    } else if (*role == "user") {
      HIPPO_RETURN_IF_ERROR(conversation.user(std::move(text), where));
    } else if (*role == "assistant") {
      if (prefix.value_or(false))
        return Status(ErrorCode::kUnavailable, fmt::format("{}: continuing a prefix assistant message is not supported", where));
      HIPPO_RETURN_IF_ERROR(conversation.assistant(std::move(text), std::move(reasoning), where));
      if (tool_calls != nullptr) HIPPO_RETURN_IF_ERROR(parse_tool_calls(*tool_calls, conversation, where));
    } else if (*role == "tool") {
      if (!tool_call_id) return invalid_request(fmt::format("{}.tool_call_id is required for a tool message", where));
      HIPPO_RETURN_IF_ERROR(conversation.tool_result(std::move(*tool_call_id), std::move(text), where));
    } else {
      return invalid_request(
          fmt::format("{}.role must be system, developer, user, assistant or tool, not '{}'", where, *role));
    }
  }
  return conversation.finish(r.settings, r.inputs, ending);
}

Status parse_tools(const json::array& tools, ChatRequest& r) {
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string where = fmt::format("tools[{}]", i);
    const json::object* t = tools[i].if_object();
    if (t == nullptr) return invalid_request(fmt::format("{} must be an object", where));
    JsonFields f(*t, where + ".");
    auto type = f.string("type");
    const json::object* function = f.object("function");
    if (!f.ok()) return invalid_request(f.error());
    if (type && *type != "function")
      return invalid_request(fmt::format("{}.type must be function, not '{}'", where, *type));
    if (function == nullptr) return invalid_request(fmt::format("{}.function is required", where));
    JsonFields ff(*function, where + ".function.");
    tokenizer::ToolDefinition def;
    auto name = ff.required_string("name");
    auto description = ff.string("description");
    const json::object* parameters = ff.object("parameters");
    if (!ff.ok()) return invalid_request(ff.error());
    def.name = *name;
    def.description = description;
    if (parameters != nullptr) {
      def.parameters = finite_json_text(*parameters);
      if (!def.parameters)
        return invalid_request(fmt::format(
            "{}.function.parameters holds a number out of range (JSON numbers here must be finite doubles)", where));
    }
    r.settings.tools.push_back(std::move(def));
  }
  return Status::ok_status();
}

}  // namespace

namespace {

// reasoning_effort turns thinking on, at that effort.
Status apply_reasoning_effort(std::string_view effort, agents::SessionSettings& settings) {
  settings.thinking = true;
  if (effort == "low" || effort == "minimal") settings.effort = tokenizer::ReasoningEffort::kLow;
  else if (effort == "medium") settings.effort = tokenizer::ReasoningEffort::kDefault;
  else if (effort == "high") settings.effort = tokenizer::ReasoningEffort::kHigh;
  else
    return invalid_request(fmt::format("reasoning_effort must be minimal, low, medium or high, not '{}'", effort));
  return Status::ok_status();
}

// {"type": "function", "function": {"name"}} or the Responses API's {"type": "function", "name"}:
// the tools narrowed to that one, a call required.
Status force_named_tool(const json::object& choice, agents::SessionSettings& settings) {
  JsonFields f(choice, "tool_choice.");
  auto type = f.string("type");
  const json::object* function = f.object("function");
  auto flat_name = f.string("name");  // the Responses API's {"type": "function", "name": ...}
  if (!f.ok()) return invalid_request(f.error());
  if (type != "function") return invalid_request("tool_choice.type must be function");
  std::optional<std::string> name = flat_name;
  if (function != nullptr) {
    JsonFields ff(*function, "tool_choice.function.");
    name = ff.required_string("name");
    if (!ff.ok()) return invalid_request(ff.error());
  }
  if (!name) return invalid_request("tool_choice names no function");
  auto tool = std::find_if(settings.tools.begin(), settings.tools.end(),
                           [&](const tokenizer::ToolDefinition& t) { return t.name == *name; });
  if (tool == settings.tools.end())
    return invalid_request(fmt::format("tool_choice names '{}', which is not among the tools", *name));
  // The model sees that one tool and must call it: DeepSeek's chat encoding has no named choice.
  std::vector<tokenizer::ToolDefinition> only{*tool};
  settings.tools = std::move(only);
  settings.tool_choice = tokenizer::ToolChoice::kRequired;
  return Status::ok_status();
}

}  // namespace

Result<json::value> parse_body(std::string_view body) {
  boost::system::error_code ec;
  json::value doc = json::parse(body, ec);
  if (ec) return invalid_request(fmt::format("the request body is not JSON: {}", ec.message()));
  if (!doc.is_object()) return invalid_request("the request body must be a JSON object");
  return doc;
}

Status apply_tool_choice(const json::value& choice, agents::SessionSettings& settings) {
  if (choice.is_null()) return Status::ok_status();
  if (const json::object* named = choice.if_object()) return force_named_tool(*named, settings);
  if (!choice.is_string()) return invalid_request("tool_choice must be auto, none, required or names a function");
  const std::string_view c = choice.get_string();
  if (c == "auto") settings.tool_choice = tokenizer::ToolChoice::kAuto;
  else if (c == "none") settings.tool_choice = tokenizer::ToolChoice::kNone;
  else if (c == "required") settings.tool_choice = tokenizer::ToolChoice::kRequired;
  else
    return invalid_request(fmt::format("tool_choice must be auto, none or required, not '{}'", c));
  return Status::ok_status();
}

Status apply_sampling(std::optional<double> temperature, std::optional<double> top_p, std::optional<int64_t> seed,
                      const std::optional<std::vector<std::string>>& stop, agents::ResponseOptions& options) {
  if (temperature) options.sampling.temperature = *temperature;
  if (!(options.sampling.temperature >= 0 && options.sampling.temperature <= 2))
    return invalid_request("temperature must be in [0, 2]");
  if (top_p) options.sampling.top_p = *top_p;
  if (!(options.sampling.top_p > 0 && options.sampling.top_p <= 1)) return invalid_request("top_p must be in (0, 1]");
  if (seed) options.sampling.seed = static_cast<uint64_t>(*seed);
  if (stop) {
    for (const std::string& one : *stop)
      if (one.empty()) return invalid_request("stop strings must not be empty");
    options.stop = *stop;
  }
  return Status::ok_status();
}

Result<ChatRequest> parse_chat_request(std::string_view body, const std::string& served_model,
                                       int64_t default_max_tokens) {
  HIPPO_ASSIGN_OR_RETURN(json::value doc, parse_body(body));
  const json::object& o = doc.get_object();
  JsonFields f(o);
  ChatRequest r;
  r.settings.thinking = false;
  r.options.max_output_tokens = default_max_tokens;
  r.options.sampling.temperature = 1.0;  // OpenAI's default
  auto model = f.required_string("model");
  const json::array* messages = f.array("messages");
  const json::array* tools = f.array("tools");
  auto stream = f.boolean("stream");
  const json::object* stream_options = f.object("stream_options");
  auto max_tokens = f.integer("max_tokens");
  auto max_completion_tokens = f.integer("max_completion_tokens");
  auto temperature = f.number("temperature");
  auto top_p = f.number("top_p");
  auto seed = f.integer("seed");
  auto stop = f.strings("stop");
  auto n = f.integer("n");
  auto reasoning_effort = f.string("reasoning_effort");
  auto logprobs = f.boolean("logprobs");
  auto top_logprobs = f.integer("top_logprobs");
  auto parallel_tool_calls = f.boolean("parallel_tool_calls");
  if (!f.ok()) return invalid_request(f.error());
  r.options.parallel_tool_calls = parallel_tool_calls.value_or(true);
  if (top_logprobs && !logprobs.value_or(false)) return invalid_request("top_logprobs needs logprobs: true");
  if (top_logprobs && (*top_logprobs < 0 || *top_logprobs > agents::kMaxTopLogprobs))
    return invalid_request(fmt::format("top_logprobs must be in [0, {}]", agents::kMaxTopLogprobs));
  if (logprobs.value_or(false)) r.options.top_logprobs = static_cast<int>(top_logprobs.value_or(0));
  r.model = *model;
  if (r.model != served_model)
    return Status(ErrorCode::kNotFound, fmt::format("model '{}' is not served here; this server serves '{}'", r.model, served_model));
  if (messages == nullptr) return invalid_request("messages is required");
  HIPPO_RETURN_IF_ERROR(parse_messages(*messages, r, ConversationInput::Ending::kAwaitingAnswer));
  if (tools != nullptr) HIPPO_RETURN_IF_ERROR(parse_tools(*tools, r));
  if (const json::value* choice = o.if_contains("tool_choice")) HIPPO_RETURN_IF_ERROR(apply_tool_choice(*choice, r.settings));
  if (const json::value* format = o.if_contains("response_format"); format != nullptr && !format->is_null()) {
    const json::object* fo = format->if_object();
    const json::value* type = fo ? fo->if_contains("type") : nullptr;
    if (type == nullptr || !type->is_string() || type->get_string() != "text")
      return Status(ErrorCode::kUnavailable, "response_format other than {\"type\": \"text\"} is not supported yet");
  }
  if (n && *n != 1) return invalid_request("n must be 1 (one choice per request)");
  r.stream = stream.value_or(false);
  if (stream_options != nullptr) {
    JsonFields so(*stream_options, "stream_options.");
    if (auto v = so.boolean("include_usage")) r.include_usage = *v;
    if (!so.ok()) return invalid_request(so.error());
  }
  if (max_completion_tokens) r.options.max_output_tokens = *max_completion_tokens;
  else if (max_tokens) r.options.max_output_tokens = *max_tokens;
  if (r.options.max_output_tokens <= 0) return invalid_request("max_tokens must be positive");
  HIPPO_RETURN_IF_ERROR(apply_sampling(temperature, top_p, seed, stop, r.options));
  if (reasoning_effort) HIPPO_RETURN_IF_ERROR(apply_reasoning_effort(*reasoning_effort, r.settings));
  return r;
}

Result<ChatRequest> parse_chat_transcript(std::string_view body) {
  HIPPO_ASSIGN_OR_RETURN(json::value doc, parse_body(body));
  const json::object& o = doc.get_object();
  JsonFields f(o);
  ChatRequest r;
  r.settings.thinking = false;
  const json::array* messages = f.array("messages");
  const json::array* tools = f.array("tools");
  auto reasoning_effort = f.string("reasoning_effort");
  if (!f.ok()) return invalid_request(f.error());
  if (messages == nullptr) return invalid_request("messages is required");
  HIPPO_RETURN_IF_ERROR(parse_messages(*messages, r, ConversationInput::Ending::kAnswered));
  if (tools != nullptr) HIPPO_RETURN_IF_ERROR(parse_tools(*tools, r));
  if (const json::value* choice = o.if_contains("tool_choice")) HIPPO_RETURN_IF_ERROR(apply_tool_choice(*choice, r.settings));
  if (reasoning_effort) HIPPO_RETURN_IF_ERROR(apply_reasoning_effort(*reasoning_effort, r.settings));
  return r;
}

std::string error_body(std::string_view message, std::string_view type, std::string_view code) {
  // The message may quote raw bytes of the request (its target), and JSON text must be UTF-8.
  return json::serialize(json::object{
      {"error", {{"message", tokenizer::repair_utf8(message)}, {"type", type}, {"param", nullptr}, {"code", code}}}});
}

int request_error_status(const Status& status) { return status.code() == ErrorCode::kNotFound ? 404 : 400; }

std::string_view request_error_code(const Status& status) {
  switch (status.code()) {
    case ErrorCode::kNotFound: return "model_not_found";
    case ErrorCode::kUnavailable: return "unsupported";
    default: return "invalid_request";
  }
}

int http_status_for(const Status& status) {
  switch (status.code()) {
    case ErrorCode::kInvalidArgument: return 400;
    case ErrorCode::kNotFound: return 404;
    case ErrorCode::kFailedPrecondition: return 409;
    case ErrorCode::kResourceExhausted: return 429;
    case ErrorCode::kUnavailable: return 501;
    case ErrorCode::kCancelled: return 503;
    default: return 500;
  }
}

namespace {

json::object model_object(const std::string& model_id, int64_t created) {
  return {{"id", model_id}, {"object", "model"}, {"created", created}, {"owned_by", "hippo"}};
}

}  // namespace

std::string models_body(const std::string& model_id, int64_t created) {
  return json::serialize(json::object{{"object", "list"}, {"data", json::array{model_object(model_id, created)}}});
}

std::string model_body(const std::string& model_id, int64_t created) {
  return json::serialize(model_object(model_id, created));
}

namespace {

json::object usage_object(const agents::Usage& u) {
  return {{"prompt_tokens", u.input_tokens},
          {"completion_tokens", u.output_tokens},
          {"total_tokens", u.input_tokens + u.output_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}},
          // OpenAI's fields for predicted outputs, which speculative drafts are.
          {"completion_tokens_details",
           {{"accepted_prediction_tokens", u.accepted_tokens},
            {"rejected_prediction_tokens", u.drafted_tokens - u.accepted_tokens}}}};
}

std::string finish_reason_name(const std::string& reason) { return reason.empty() ? "stop" : reason; }

// OpenAI's {token, logprob, bytes}: the token as UTF-8 text (U+FFFD for a partial character) and
// its exact bytes.
json::object token_logprob(const agents::TokenLogprob& t) {
  json::array bytes;
  for (unsigned char b : t.token) bytes.emplace_back(static_cast<int64_t>(b));
  return {{"token", tokenizer::repair_utf8(t.token)}, {"logprob", t.logprob}, {"bytes", std::move(bytes)}};
}

json::object logprob_entry(const agents::ResponseEvent& e) {
  json::object o = token_logprob({e.text, e.logprob});
  json::array top;
  for (const agents::TokenLogprob& t : e.top_logprobs) top.push_back(token_logprob(t));
  o["top_logprobs"] = std::move(top);
  return o;
}

}  // namespace

ChatCompletion::ChatCompletion(std::string id, std::string model, int64_t created, bool include_usage, bool logprobs)
    : id_(std::move(id)), model_(std::move(model)), created_(created), include_usage_(include_usage),
      logprobs_requested_(logprobs) {}

std::string ChatCompletion::chunk(std::string_view delta_json, std::string_view finish_reason,
                                  std::optional<uint64_t> seed) {
  json::object choice{{"index", 0}, {"delta", json::parse(delta_json)}, {"logprobs", nullptr}};
  if (!logprobs_.empty()) {
    choice["logprobs"] = json::object{{"content", std::move(logprobs_)}, {"refusal", nullptr}};
    logprobs_ = {};
  }
  choice["finish_reason"] = finish_reason.empty() ? json::value(nullptr) : json::value(finish_reason);
  json::object c{{"id", id_},
                 {"object", "chat.completion.chunk"},
                 {"created", created_},
                 {"model", model_},
                 {"choices", json::array{std::move(choice)}}};
  if (include_usage_) c["usage"] = nullptr;
  if (seed) c["seed"] = *seed;
  return "data: " + json::serialize(c) + "\n\n";
}

int ChatCompletion::tool_index(const std::string& call_id) {
  for (size_t i = 0; i < tool_calls_.size(); ++i)
    if (tool_calls_[i].id == call_id) return static_cast<int>(i);
  tool_calls_.push_back({call_id, {}, {}});
  return static_cast<int>(tool_calls_.size() - 1);
}

std::string ChatCompletion::stream_start() { return chunk(R"({"role":"assistant","content":""})", ""); }

std::string ChatCompletion::stream_event(const agents::ResponseEvent& e) {
  using Kind = agents::ResponseEvent::Kind;
  switch (e.kind) {
    case Kind::kTextDelta:
      return chunk(json::serialize(json::object{{"content", e.text}}), "");
    case Kind::kReasoningDelta:
      return chunk(json::serialize(json::object{{"reasoning_content", e.text}}), "");
    case Kind::kToolCallBegin: {
      const int index = tool_index(e.call_id);
      json::object call{{"index", index},
                        {"id", e.call_id},
                        {"type", "function"},
                        {"function", {{"name", e.name}, {"arguments", ""}}}};
      return chunk(json::serialize(json::object{{"tool_calls", json::array{std::move(call)}}}), "");
    }
    case Kind::kToolCallArgumentsDelta: {
      const int index = tool_index(e.call_id);
      json::object call{{"index", index}, {"function", {{"arguments", e.text}}}};
      return chunk(json::serialize(json::object{{"tool_calls", json::array{std::move(call)}}}), "");
    }
    case Kind::kToolCallDone:
      return {};
    case Kind::kTokenLogprob:  // sent with the next chunk
      logprobs_.push_back(logprob_entry(e));
      return {};
    case Kind::kCompleted: {
      std::string out = chunk("{}", finish_reason_name(e.finish_reason), e.seed);
      if (include_usage_) {
        json::object last{{"id", id_},         {"object", "chat.completion.chunk"}, {"created", created_},
                          {"model", model_},   {"choices", json::array{}},          {"usage", usage_object(e.usage)},
                          {"seed", e.seed}};
        out += "data: " + json::serialize(last) + "\n\n";
      }
      return out + "data: [DONE]\n\n";
    }
    case Kind::kFailed: {
      json::object err{{"error", {{"message", e.error.message()}, {"type", "server_error"},
                                  {"code", error_code_name(e.error.code())}}}};
      return "data: " + json::serialize(err) + "\n\ndata: [DONE]\n\n";
    }
  }
  return {};
}

void ChatCompletion::add(const agents::ResponseEvent& e) {
  using Kind = agents::ResponseEvent::Kind;
  switch (e.kind) {
    case Kind::kTextDelta: content_ += e.text; break;
    case Kind::kReasoningDelta: reasoning_ += e.text; break;
    case Kind::kToolCallBegin: tool_calls_[static_cast<size_t>(tool_index(e.call_id))].name = e.name; break;
    case Kind::kToolCallArgumentsDelta: break;
    case Kind::kTokenLogprob: logprobs_.push_back(logprob_entry(e)); break;
    case Kind::kToolCallDone: {
      ToolCall& call = tool_calls_[static_cast<size_t>(tool_index(e.call_id))];
      call.name = e.name;
      call.arguments = e.text;
      break;
    }
    case Kind::kCompleted:
      finish_reason_ = finish_reason_name(e.finish_reason);
      usage_ = e.usage;
      seed_ = e.seed;
      break;
    case Kind::kFailed: error_ = e.error; break;
  }
}

std::string ChatCompletion::body() const {
  json::object message{{"role", "assistant"}};
  message["content"] = content_.empty() && !tool_calls_.empty() ? json::value(nullptr) : json::value(content_);
  if (!reasoning_.empty()) message["reasoning_content"] = reasoning_;
  if (!tool_calls_.empty()) {
    json::array calls;
    for (const ToolCall& c : tool_calls_)
      calls.push_back(json::object{{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    message["tool_calls"] = std::move(calls);
  }
  return json::serialize(json::object{
      {"id", id_},
      {"object", "chat.completion"},
      {"created", created_},
      {"model", model_},
      {"choices", json::array{json::object{
                      {"index", 0},
                      {"message", std::move(message)},
                      {"logprobs", logprobs_requested_ ? json::value(json::object{{"content", logprobs_}, {"refusal", nullptr}})
                                                       : json::value(nullptr)},
                      {"finish_reason", finish_reason_}}}},
      {"usage", usage_object(usage_)},
      {"seed", seed_},  // hippo's: the sampling seed, given or drawn (send it back to repeat the answer)
  });
}

}  // namespace hippo::server::openai
