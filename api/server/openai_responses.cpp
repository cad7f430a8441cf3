#include "api/server/openai_responses.h"

#include "api/server/conversation_input.h"
#include "api/server/json_fields.h"
#include "api/server/openai_chat.h"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value_to.hpp>
#include <fmt/format.h>

namespace hippo::server::openai {

namespace json = boost::json;

namespace {

Status unsupported(std::string message) { return Status(ErrorCode::kUnavailable, std::move(message)); }

// Responses tools: [{type: "function", name, description, parameters, strict}].
Status parse_tools(const json::array& tools, agents::SessionSettings& settings) {
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string where = fmt::format("tools[{}]", i);
    const json::object* t = tools[i].if_object();
    if (t == nullptr) return invalid_request(fmt::format("{} must be an object", where));
    JsonFields f(*t, where + ".");
    auto type = f.required_string("type");
    auto name = f.string("name");
    auto description = f.string("description");
    const json::object* parameters = f.object("parameters");
    if (!f.ok()) return invalid_request(f.error());
    if (*type != "function") return unsupported(fmt::format("{}: tools of type '{}' are not supported; only function tools", where, *type));
    if (!name || name->empty()) return invalid_request(fmt::format("{}.name is required", where));
    tokenizer::ToolDefinition def;
    def.name = *name;
    def.description = description;
    if (parameters != nullptr) {
      def.parameters = finite_json_text(*parameters);
      if (!def.parameters) return invalid_request(fmt::format("{}.parameters holds a number out of range", where));
    }
    settings.tools.push_back(std::move(def));
  }
  return Status::ok_status();
}

// A message's content: a string, or parts of text (input_text, output_text, text, refusal).
Result<std::string> content_text(const json::value* content, const std::string& where) {
  if (content == nullptr || content->is_null()) return std::string();
  if (content->is_string()) return std::string(content->get_string());
  if (!content->is_array())
    return invalid_request(fmt::format("{}.content must be a string or an array of parts", where));
  std::string text;
  const json::array& parts = content->get_array();
  for (size_t j = 0; j < parts.size(); ++j) {
    const std::string at = fmt::format("{}.content[{}]", where, j);
    const json::object* part = parts[j].if_object();
    if (part == nullptr) return invalid_request(fmt::format("{} must be an object", at));
    JsonFields f(*part, at + ".");
    auto type = f.required_string("type");
    auto t = f.string(*type == "refusal" ? "refusal" : "text");
    if (!f.ok()) return invalid_request(f.error());
    if (*type != "input_text" && *type != "output_text" && *type != "text" && *type != "refusal")
      return unsupported(fmt::format("{}: content parts of type '{}' are not supported; only text", at, *type));
    text += t.value_or("");
  }
  return text;
}

Status add_input_item(const json::value& value, const std::string& where, ConversationInput& conversation) {
  const json::object* item = value.if_object();
  if (item == nullptr) return invalid_request(fmt::format("{} must be an object", where));
  JsonFields f(*item, where + ".");
  auto type = f.string("type");
  auto role = f.string("role");
  if (!f.ok()) return invalid_request(f.error());
  const std::string kind = type.value_or(role ? "message" : "");
  if (kind == "message") {
    if (!role) return invalid_request(fmt::format("{}.role is required", where));
    HIPPO_ASSIGN_OR_RETURN(std::string text, content_text(item->if_contains("content"), where));
    if (*role == "user") return conversation.user(std::move(text), where);
    if (*role == "system" || *role == "developer") return conversation.system(text, where);
    if (*role == "assistant") return conversation.assistant(std::move(text), std::nullopt, where);
    return invalid_request(fmt::format("{}.role must be user, system, developer or assistant, not '{}'", where, *role));
  }
  if (kind == "function_call") {
    auto call_id = f.required_string("call_id");
    auto name = f.required_string("name");
    auto arguments = f.required_string("arguments");
    if (!f.ok()) return invalid_request(f.error());
    return conversation.call({*call_id, *name, *arguments}, where);
  }
  if (kind == "function_call_output") {
    auto call_id = f.required_string("call_id");
    if (!f.ok()) return invalid_request(f.error());
    const json::value* output = item->if_contains("output");
    HIPPO_ASSIGN_OR_RETURN(std::string text, content_text(output, where));
    return conversation.tool_result(*call_id, std::move(text), where);
  }
  if (kind == "reasoning") return Status::ok_status();  // the session keeps the model's own reasoning
  if (kind.empty())
    return invalid_request(fmt::format("{} needs a type (message, function_call, function_call_output)", where));
  return unsupported(fmt::format("{}: input items of type '{}' are not supported", where, kind));
}

}  // namespace

Result<ResponsesRequest> parse_responses_request(std::string_view body, const std::string& served_model,
                                                 int64_t default_max_tokens) {
  HIPPO_ASSIGN_OR_RETURN(json::value doc, parse_body(body));
  const json::object& o = doc.get_object();
  JsonFields f(o);
  ResponsesRequest r;
  r.options.max_output_tokens = default_max_tokens;
  r.options.sampling.temperature = 1.0;
  auto model = f.required_string("model");
  auto instructions = f.string("instructions");
  const json::array* tools = f.array("tools");
  auto parallel = f.boolean("parallel_tool_calls");
  auto previous = f.string("previous_response_id");
  auto store = f.boolean("store");
  auto stream = f.boolean("stream");
  auto temperature = f.number("temperature");
  auto top_p = f.number("top_p");
  auto max_output_tokens = f.integer("max_output_tokens");
  auto seed = f.integer("seed");   // hippo's: the sampling seed
  auto stop = f.strings("stop");   // hippo's: as in chat completions
  const json::object* reasoning = f.object("reasoning");
  const json::object* text = f.object("text");
  const json::object* metadata = f.object("metadata");
  auto truncation = f.string("truncation");
  auto top_logprobs = f.integer("top_logprobs");
  auto background = f.boolean("background");
  if (!f.ok()) return invalid_request(f.error());
  r.model = *model;
  if (r.model != served_model)
    return Status(ErrorCode::kNotFound, fmt::format("model '{}' is not served here; this server serves '{}'", r.model, served_model));
  const json::value* input = o.if_contains("input");
  if (input == nullptr || !(input->is_string() || input->is_array()))
    return invalid_request("input is required: a string or an array of items");
  r.input = *input;
  if (top_logprobs) return unsupported("top_logprobs is not supported on /v1/responses; use /v1/chat/completions");
  if (background.value_or(false)) return unsupported("background responses are not supported");
  for (std::string_view field : {"conversation", "prompt"})
    if (const json::value* v = o.if_contains(field); v != nullptr && !v->is_null())
      return unsupported(fmt::format("{} is not supported; send the conversation as input (or previous_response_id)", field));
  if (truncation && *truncation != "disabled" && *truncation != "auto")
    return invalid_request(fmt::format("truncation must be auto or disabled, not '{}'", *truncation));
  if (text != nullptr) {
    const json::value* format = text->if_contains("format");
    const json::object* fo = format ? format->if_object() : nullptr;
    const json::value* type = fo ? fo->if_contains("type") : nullptr;
    if (format != nullptr && !format->is_null() && (type == nullptr || !type->is_string() || type->get_string() != "text"))
      return unsupported("text.format other than {\"type\": \"text\"} is not supported yet");
  }
  if (instructions) r.settings.instructions = *instructions;
  if (tools != nullptr) HIPPO_RETURN_IF_ERROR(parse_tools(*tools, r.settings));
  json::value choice_echo = "auto";
  if (const json::value* choice = o.if_contains("tool_choice"); choice != nullptr && !choice->is_null()) {
    choice_echo = *choice;
    HIPPO_RETURN_IF_ERROR(apply_tool_choice(*choice, r.settings));
  }
  if (reasoning != nullptr) {
    JsonFields rf(*reasoning, "reasoning.");
    auto effort = rf.string("effort");
    if (!rf.ok()) return invalid_request(rf.error());
    if (effort && *effort != "none") {
      r.settings.thinking = true;
      if (*effort == "minimal" || *effort == "low") r.settings.effort = tokenizer::ReasoningEffort::kLow;
      else if (*effort == "medium") r.settings.effort = tokenizer::ReasoningEffort::kDefault;
      else if (*effort == "high") r.settings.effort = tokenizer::ReasoningEffort::kHigh;
      else
        return invalid_request(
            fmt::format("reasoning.effort must be none, minimal, low, medium or high, not '{}'", *effort));
    }
  }
  r.options.parallel_tool_calls = parallel.value_or(true);
  r.previous_response_id = previous.value_or("");
  r.store = store.value_or(true);
  r.stream = stream.value_or(false);
  if (max_output_tokens) r.options.max_output_tokens = *max_output_tokens;
  if (r.options.max_output_tokens <= 0) return invalid_request("max_output_tokens must be positive");
  HIPPO_RETURN_IF_ERROR(apply_sampling(temperature, top_p, seed, stop, r.options));
  r.echo = {{"instructions", instructions ? json::value(*instructions) : json::value(nullptr)},
            {"tools", tools ? json::value(*tools) : json::value(json::array{})},
            {"tool_choice", choice_echo},
            {"parallel_tool_calls", r.options.parallel_tool_calls},
            {"previous_response_id", previous ? json::value(*previous) : json::value(nullptr)},
            {"store", r.store},
            {"temperature", r.options.sampling.temperature},
            {"top_p", r.options.sampling.top_p},
            {"max_output_tokens", r.options.max_output_tokens},
            {"truncation", truncation.value_or("disabled")},
            {"text", {{"format", {{"type", "text"}}}}},
            {"reasoning", reasoning ? json::value(*reasoning) : json::value(nullptr)},
            {"metadata", metadata ? json::value(*metadata) : json::value(json::object{})}};
  return r;
}

Status build_conversation(const ResponsesRequest& request, std::span<const agents::InputItem> previous,
                          agents::SessionSettings& settings, std::vector<agents::InputItem>& items) {
  ConversationInput conversation;
  for (const agents::InputItem& item : previous) {
    const std::string_view where = "the conversation of previous_response_id";
    switch (item.kind) {
      case agents::InputItem::Kind::kUserMessage: HIPPO_RETURN_IF_ERROR(conversation.user(item.content, where)); break;
      case agents::InputItem::Kind::kToolResult:
        HIPPO_RETURN_IF_ERROR(conversation.tool_result(item.tool_call_id, item.content, where));
        break;
      case agents::InputItem::Kind::kAssistantMessage:
        HIPPO_RETURN_IF_ERROR(conversation.assistant(item.content, item.reasoning, where));
        for (const tokenizer::ToolCall& call : item.tool_calls) HIPPO_RETURN_IF_ERROR(conversation.call(call, where));
        break;
    }
  }
  if (request.input.is_string()) {
    HIPPO_RETURN_IF_ERROR(conversation.user(std::string(request.input.get_string()), "input"));
  } else {
    const json::array& input = request.input.get_array();
    for (size_t i = 0; i < input.size(); ++i)
      HIPPO_RETURN_IF_ERROR(add_input_item(input[i], fmt::format("input[{}]", i), conversation));
  }
  return conversation.finish(settings, items);
}

std::string conversation_to_json(std::span<const agents::InputItem> items) {
  json::array out;
  for (const agents::InputItem& item : items) {
    json::object o{{"content", item.content}};
    switch (item.kind) {
      case agents::InputItem::Kind::kUserMessage: o["type"] = "user"; break;
      case agents::InputItem::Kind::kToolResult:
        o["type"] = "tool";
        o["call_id"] = item.tool_call_id;
        break;
      case agents::InputItem::Kind::kAssistantMessage: {
        o["type"] = "assistant";
        if (item.reasoning) o["reasoning"] = *item.reasoning;
        json::array calls;
        for (const tokenizer::ToolCall& c : item.tool_calls)
          calls.push_back(json::object{{"id", c.id}, {"name", c.name}, {"arguments", c.arguments}});
        o["calls"] = std::move(calls);
        break;
      }
    }
    out.push_back(std::move(o));
  }
  return json::serialize(out);
}

Result<std::vector<agents::InputItem>> conversation_from_json(std::string_view text) {
  const Status corrupt(ErrorCode::kCorrupt, "a stored response's conversation is not what this server wrote");
  boost::system::error_code ec;
  const json::value doc = json::parse(text, ec);
  if (ec || !doc.is_array()) return corrupt;
  std::vector<agents::InputItem> items;
  try {
    for (const json::value& v : doc.get_array()) {
      const json::object& o = v.as_object();
      agents::InputItem item;
      item.content = json::value_to<std::string>(o.at("content"));
      const std::string type = json::value_to<std::string>(o.at("type"));
      if (type == "tool") {
        item.kind = agents::InputItem::Kind::kToolResult;
        item.tool_call_id = json::value_to<std::string>(o.at("call_id"));
      } else if (type == "assistant") {
        item.kind = agents::InputItem::Kind::kAssistantMessage;
        if (const json::value* r = o.if_contains("reasoning")) item.reasoning = json::value_to<std::string>(*r);
        for (const json::value& c : o.at("calls").as_array())
          item.tool_calls.push_back({json::value_to<std::string>(c.at("id")), json::value_to<std::string>(c.at("name")),
                                     json::value_to<std::string>(c.at("arguments"))});
      } else if (type != "user") {
        return corrupt;
      }
      items.push_back(std::move(item));
    }
  } catch (const std::exception&) {
    return corrupt;
  }
  return items;
}

std::string deleted_body(std::string_view id) {
  return json::serialize(json::object{{"id", id}, {"object", "response.deleted"}, {"deleted", true}});
}

ResponseObject::ResponseObject(std::string id, std::string model, int64_t created_at, json::object echo)
    : id_(std::move(id)), model_(std::move(model)), created_at_(created_at), echo_(std::move(echo)) {
  answer_.kind = agents::InputItem::Kind::kAssistantMessage;
}

json::object ResponseObject::response(std::string_view status) const {
  json::object r{{"id", id_},        {"object", "response"}, {"created_at", created_at_}, {"status", status},
                 {"model", model_},  {"output", output_},    {"error", nullptr},          {"incomplete_details", nullptr},
                 {"usage", nullptr}};
  for (const auto& [key, value] : echo_) r[key] = value;
  if (status != "in_progress") {
    r["usage"] = json::object{{"input_tokens", usage_.input_tokens},
                              {"input_tokens_details", {{"cached_tokens", usage_.cached_tokens}}},
                              {"output_tokens", usage_.output_tokens},
                              {"output_tokens_details", {{"reasoning_tokens", 0}}},
                              {"total_tokens", usage_.input_tokens + usage_.output_tokens}};
  }
  if (incomplete_reason_) r["incomplete_details"] = json::object{{"reason", *incomplete_reason_}};
  if (!error_.ok()) r["error"] = json::object{{"code", error_code_name(error_.code())}, {"message", error_.message()}};
  return r;
}

void ResponseObject::send(std::string* sse, std::string_view type, json::object fields) {
  if (sse == nullptr) return;
  fields["type"] = type;
  fields["sequence_number"] = sequence_++;
  *sse += fmt::format("event: {}\ndata: {}\n\n", type, json::serialize(fields));
}

void ResponseObject::open_item(std::string* sse, json::object item) {
  open_ = true;
  open_type_ = std::string(item.at("type").as_string());
  open_text_.clear();
  const int64_t index = static_cast<int64_t>(output_.size());
  output_.push_back(item);
  send(sse, "response.output_item.added", {{"output_index", index}, {"item", std::move(item)}});
  if (open_type_ == "message") {
    send(sse, "response.content_part.added",
         {{"item_id", output_.back().at("id")}, {"output_index", index}, {"content_index", 0},
          {"part", {{"type", "output_text"}, {"text", ""}, {"annotations", json::array{}}}}});
  }
}

void ResponseObject::close_item(std::string* sse) {
  if (!open_) return;
  open_ = false;
  const int64_t index = static_cast<int64_t>(output_.size()) - 1;
  json::object& item = output_.back().as_object();
  const json::value item_id = item.at("id");
  item["status"] = "completed";
  if (open_type_ == "message") {
    json::object part{{"type", "output_text"}, {"text", open_text_}, {"annotations", json::array{}}, {"logprobs", json::array{}}};
    item["content"] = json::array{part};
    send(sse, "response.output_text.done",
         {{"item_id", item_id}, {"output_index", index}, {"content_index", 0}, {"text", open_text_}, {"logprobs", json::array{}}});
    send(sse, "response.content_part.done", {{"item_id", item_id}, {"output_index", index}, {"content_index", 0}, {"part", part}});
  } else if (open_type_ == "reasoning") {
    item["content"] = json::array{json::object{{"type", "reasoning_text"}, {"text", open_text_}}};
    send(sse, "response.reasoning_text.done", {{"item_id", item_id}, {"output_index", index}, {"content_index", 0}, {"text", open_text_}});
  } else {
    item["arguments"] = open_text_;
    send(sse, "response.function_call_arguments.done", {{"item_id", item_id}, {"output_index", index}, {"arguments", open_text_}});
  }
  send(sse, "response.output_item.done", {{"output_index", index}, {"item", output_.back()}});
}

void ResponseObject::apply(const agents::ResponseEvent& e, std::string* sse) {
  using Kind = agents::ResponseEvent::Kind;
  const auto index = [&] { return static_cast<int64_t>(output_.size()) - 1; };
  const auto item_id = [&] { return output_.back().at("id"); };
  switch (e.kind) {
    case Kind::kReasoningDelta:
      if (!open_ || open_type_ != "reasoning") {
        close_item(sse);
        open_item(sse, {{"type", "reasoning"}, {"id", fmt::format("rs_{}_{}", id_, output_.size())}, {"summary", json::array{}},
                        {"status", "in_progress"}});
      }
      open_text_ += e.text;
      send(sse, "response.reasoning_text.delta", {{"item_id", item_id()}, {"output_index", index()}, {"content_index", 0}, {"delta", e.text}});
      break;
    case Kind::kTextDelta:
      if (!open_ || open_type_ != "message") {
        close_item(sse);
        open_item(sse, {{"type", "message"}, {"id", fmt::format("msg_{}_{}", id_, output_.size())}, {"status", "in_progress"},
                        {"role", "assistant"}, {"content", json::array{}}});
      }
      open_text_ += e.text;
      answer_.content += e.text;
      send(sse, "response.output_text.delta", {{"item_id", item_id()}, {"output_index", index()}, {"content_index", 0},
                                               {"delta", e.text}, {"logprobs", json::array{}}});
      break;
    case Kind::kToolCallBegin:
      close_item(sse);
      open_item(sse, {{"type", "function_call"}, {"id", "fc_" + e.call_id}, {"call_id", e.call_id}, {"name", e.name},
                      {"arguments", ""}, {"status", "in_progress"}});
      break;
    case Kind::kToolCallArgumentsDelta:
      if (!open_ || open_type_ != "function_call") break;
      open_text_ += e.text;
      send(sse, "response.function_call_arguments.delta", {{"item_id", item_id()}, {"output_index", index()}, {"delta", e.text}});
      break;
    case Kind::kToolCallDone:
      if (!open_ || open_type_ != "function_call") break;
      open_text_ = e.text;
      close_item(sse);
      answer_.tool_calls.push_back({e.call_id, e.name, e.text});
      break;
    case Kind::kTokenLogprob:
      break;
    case Kind::kCompleted:
      close_item(sse);
      usage_ = e.usage;
      if (e.finish_reason == "length") {
        status_ = "incomplete";
        incomplete_reason_ = "max_output_tokens";
      } else {
        status_ = e.finish_reason == "cancelled" ? "cancelled" : "completed";
      }
      send(sse, status_ == "incomplete" ? "response.incomplete" : "response.completed", {{"response", response(status_)}});
      break;
    case Kind::kFailed:
      close_item(sse);
      usage_ = e.usage;
      error_ = e.error;
      status_ = "failed";
      send(sse, "response.failed", {{"response", response(status_)}});
      break;
  }
}

std::string ResponseObject::stream_start() {
  std::string sse;
  send(&sse, "response.created", {{"response", response("in_progress")}});
  send(&sse, "response.in_progress", {{"response", response("in_progress")}});
  return sse;
}

std::string ResponseObject::stream_event(const agents::ResponseEvent& event) {
  std::string sse;
  apply(event, &sse);
  return sse;
}

void ResponseObject::add(const agents::ResponseEvent& event) { apply(event, nullptr); }

std::string ResponseObject::body() const { return json::serialize(response(status_)); }

agents::InputItem ResponseObject::answer_item() const { return answer_; }

}  // namespace hippo::server::openai
