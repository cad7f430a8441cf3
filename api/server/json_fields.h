// Typed reads of a client's JSON object, shared by the WebSocket protocol and the OpenAI endpoint.
// A field that is absent or null reads as nullopt; a field of the wrong type records an error
// (the first one wins) naming the field and the type it must have, and also reads as nullopt.
#pragma once

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hippo::server {

class JsonFields {
 public:
  // prefix names the object in messages: "items[2]." gives "items[2].content must be a string".
  explicit JsonFields(const boost::json::object& object, std::string prefix = {});

  std::optional<std::string> string(std::string_view key);
  std::optional<int64_t> integer(std::string_view key);
  std::optional<uint64_t> unsigned_integer(std::string_view key);
  std::optional<double> number(std::string_view key);  // an integer or a floating-point number
  std::optional<bool> boolean(std::string_view key);
  const boost::json::array* array(std::string_view key);
  const boost::json::object* object(std::string_view key);
  // A string or an array of strings (OpenAI's `stop`).
  std::optional<std::vector<std::string>> strings(std::string_view key);
  // Like string(), but an absent field is an error too.
  std::optional<std::string> required_string(std::string_view key);

  void fail(std::string message);
  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  // The field the first error is about ("" when the error was not about one field).
  const std::string& error_field() const { return error_field_; }

 private:
  const boost::json::value* find(std::string_view key) const;
  void wrong_type(std::string_view key, std::string_view must_be);

  const boost::json::object& object_;
  std::string prefix_;
  std::string error_;
  std::string error_field_;
};

// `object` as JSON text, or nullopt when a number in it is not finite. Boost.JSON reads a literal
// beyond the range of a double (1e999) as infinity, which has no JSON text: written back, the object
// would not parse again (a tool's parameters are, whenever a prompt is rendered).
std::optional<std::string> finite_json_text(const boost::json::object& object);

}  // namespace hippo::server
