#include "api/server/json_fields.h"

#include <boost/json/serialize.hpp>
#include <fmt/format.h>

#include <cmath>
#include <limits>

namespace hippo::server {

namespace json = boost::json;

JsonFields::JsonFields(const json::object& object, std::string prefix) : object_(object), prefix_(std::move(prefix)) {}

const json::value* JsonFields::find(std::string_view key) const {
  const json::value* v = object_.if_contains(key);
  return v == nullptr || v->is_null() ? nullptr : v;
}

void JsonFields::fail(std::string message) {
  if (error_.empty()) error_ = std::move(message);
}

void JsonFields::wrong_type(std::string_view key, std::string_view must_be) {
  if (!error_.empty()) return;
  error_field_ = prefix_ + std::string(key);
  error_ = fmt::format("{} must be {}", error_field_, must_be);
}

std::optional<std::string> JsonFields::string(std::string_view key) {
  const json::value* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) {
    wrong_type(key, "a string");
    return std::nullopt;
  }
  return std::string(v->get_string());
}

std::optional<std::string> JsonFields::required_string(std::string_view key) {
  if (find(key) == nullptr) {
    if (error_.empty()) {
      error_field_ = prefix_ + std::string(key);
      error_ = fmt::format("{} is required", error_field_);
    }
    return std::nullopt;
  }
  return string(key);
}

std::optional<int64_t> JsonFields::integer(std::string_view key) {
  const json::value* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->is_int64()) return v->get_int64();
  if (v->is_uint64() && v->get_uint64() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    return static_cast<int64_t>(v->get_uint64());
  if (v->is_double()) {  // 256.0 is an integer too (some clients send every number as a double)
    const double d = v->get_double();
    if (std::isfinite(d) && d == std::floor(d) && std::abs(d) < 9.0e15) return static_cast<int64_t>(d);
  }
  wrong_type(key, "an integer");
  return std::nullopt;
}

std::optional<uint64_t> JsonFields::unsigned_integer(std::string_view key) {
  const json::value* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->is_uint64()) return v->get_uint64();
  if (v->is_int64() && v->get_int64() >= 0) return static_cast<uint64_t>(v->get_int64());
  wrong_type(key, "a non-negative integer");
  return std::nullopt;
}

std::optional<double> JsonFields::number(std::string_view key) {
  const json::value* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->is_double()) return v->get_double();
  if (v->is_int64()) return static_cast<double>(v->get_int64());
  if (v->is_uint64()) return static_cast<double>(v->get_uint64());
  wrong_type(key, "a number");
  return std::nullopt;
}

std::optional<bool> JsonFields::boolean(std::string_view key) {
  const json::value* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_bool()) {
    wrong_type(key, "true or false");
    return std::nullopt;
  }
  return v->get_bool();
}

const json::array* JsonFields::array(std::string_view key) {
  const json::value* v = find(key);
  if (v == nullptr) return nullptr;
  if (!v->is_array()) {
    wrong_type(key, "an array");
    return nullptr;
  }
  return &v->get_array();
}

const json::object* JsonFields::object(std::string_view key) {
  const json::value* v = find(key);
  if (v == nullptr) return nullptr;
  if (!v->is_object()) {
    wrong_type(key, "an object");
    return nullptr;
  }
  return &v->get_object();
}

std::optional<std::vector<std::string>> JsonFields::strings(std::string_view key) {
  const json::value* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->is_string()) return std::vector<std::string>{std::string(v->get_string())};
  if (v->is_array()) {
    std::vector<std::string> out;
    for (const json::value& item : v->get_array()) {
      if (!item.is_string()) {
        wrong_type(key, "a string or an array of strings");
        return std::nullopt;
      }
      out.emplace_back(item.get_string());
    }
    return out;
  }
  wrong_type(key, "a string or an array of strings");
  return std::nullopt;
}

namespace {

bool numbers_finite(const json::value& v) {
  if (v.is_double()) return std::isfinite(v.get_double());
  if (v.is_array()) {
    for (const json::value& item : v.get_array())
      if (!numbers_finite(item)) return false;
  }
  if (v.is_object()) {
    for (const json::key_value_pair& member : v.get_object())
      if (!numbers_finite(member.value())) return false;
  }
  return true;
}

}  // namespace

std::optional<std::string> finite_json_text(const json::object& object) {
  for (const json::key_value_pair& member : object)
    if (!numbers_finite(member.value())) return std::nullopt;
  return json::serialize(object);
}

}  // namespace hippo::server
