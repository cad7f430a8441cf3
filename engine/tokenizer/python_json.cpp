// A small recursive-descent JSON reader that writes the Python json.dumps layout (python_json.h).
#include "engine/tokenizer/python_json.h"

#include "engine/tokenizer/utf8.h"

#include <fmt/format.h>

namespace hippo::tokenizer {
namespace {

// Nesting deeper than this is refused rather than risking the stack on untrusted arguments.
constexpr int kMaxDepth = 128;

class Reformatter {
 public:
  explicit Reformatter(std::string_view in) : in_(in) {}

  Status run(std::string& out) {
    skip_space();
    HIPPO_RETURN_IF_ERROR(value(out, 0));
    skip_space();
    if (pos_ != in_.size()) return error("unexpected text after the value");
    return {};
  }

  // Decodes the string literal at pos_ (which holds '"') into `text`.
  Status string_literal(std::string& text) {
    ++pos_;
    while (true) {
      if (pos_ >= in_.size()) return error("unterminated string");
      const char c = in_[pos_];
      if (c == '"') {
        ++pos_;
        return {};
      }
      if (static_cast<unsigned char>(c) < 0x20) return error("control character in a string");
      if (c != '\\') {
        text.push_back(c);
        ++pos_;
        continue;
      }
      if (++pos_ >= in_.size()) return error("unterminated escape");
      const char e = in_[pos_++];
      switch (e) {
        case '"': text.push_back('"'); break;
        case '\\': text.push_back('\\'); break;
        case '/': text.push_back('/'); break;
        case 'b': text.push_back('\b'); break;
        case 'f': text.push_back('\f'); break;
        case 'n': text.push_back('\n'); break;
        case 'r': text.push_back('\r'); break;
        case 't': text.push_back('\t'); break;
        case 'u': {
          std::uint32_t cp = 0;
          HIPPO_RETURN_IF_ERROR(hex4(cp));
          if (cp >= 0xD800 && cp <= 0xDBFF && in_.substr(pos_, 2) == "\\u") {
            const std::size_t save = pos_;
            pos_ += 2;
            std::uint32_t low = 0;
            HIPPO_RETURN_IF_ERROR(hex4(low));
            if (low >= 0xDC00 && low <= 0xDFFF) {
              cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            } else {
              pos_ = save;
            }
          }
          if (cp >= 0xD800 && cp <= 0xDFFF) cp = kReplacementChar;  // a lone surrogate
          append_utf8(static_cast<char32_t>(cp), text);
          break;
        }
        default:
          return error("invalid escape");
      }
    }
  }

  // The members of the object that `in_` holds (already validated by run()).
  Status object_members(std::vector<JsonMember>& members) {
    skip_space();
    if (pos_ >= in_.size() || in_[pos_] != '{') return error("not an object");
    ++pos_;
    skip_space();
    if (in_[pos_] == '}') return {};
    while (true) {
      skip_space();
      JsonMember member;
      HIPPO_RETURN_IF_ERROR(string_literal(member.key));
      skip_space();
      ++pos_;  // ':'
      skip_space();
      if (in_[pos_] == '"') {
        member.is_string = true;
        HIPPO_RETURN_IF_ERROR(string_literal(member.value));
      } else {
        HIPPO_RETURN_IF_ERROR(value(member.value, 1));
      }
      members.push_back(std::move(member));
      skip_space();
      if (in_[pos_++] == '}') return {};
    }
  }

  void skip_space() {
    while (pos_ < in_.size() && (in_[pos_] == ' ' || in_[pos_] == '\t' || in_[pos_] == '\n' || in_[pos_] == '\r')) ++pos_;
  }

 private:
  Status error(std::string_view what) const {
    return make_error(ErrorCode::kInvalidArgument, "not JSON: {} at byte {}", what, pos_);
  }

  Status hex4(std::uint32_t& cp) {
    if (pos_ + 4 > in_.size()) return error("short \\u escape");
    for (int i = 0; i < 4; ++i) {
      const char h = in_[pos_++];
      cp <<= 4;
      if (h >= '0' && h <= '9') cp |= static_cast<std::uint32_t>(h - '0');
      else if (h >= 'a' && h <= 'f') cp |= static_cast<std::uint32_t>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F') cp |= static_cast<std::uint32_t>(h - 'A' + 10);
      else return error("bad hex digit");
    }
    return {};
  }

  bool literal(std::string_view word) {
    if (in_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  Status number(std::string& out) {
    const std::size_t begin = pos_;
    const auto digits = [&] {
      const std::size_t from = pos_;
      while (pos_ < in_.size() && in_[pos_] >= '0' && in_[pos_] <= '9') ++pos_;
      return pos_ - from;
    };
    if (pos_ < in_.size() && in_[pos_] == '-') ++pos_;
    if (pos_ < in_.size() && in_[pos_] == '0') {
      ++pos_;
    } else if (digits() == 0) {
      return error("expected a value");
    }
    if (pos_ < in_.size() && in_[pos_] == '.') {
      ++pos_;
      if (digits() == 0) return error("digits expected after '.'");
    }
    if (pos_ < in_.size() && (in_[pos_] == 'e' || in_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < in_.size() && (in_[pos_] == '+' || in_[pos_] == '-')) ++pos_;
      if (digits() == 0) return error("digits expected in the exponent");
    }
    out.append(in_.substr(begin, pos_ - begin));
    return {};
  }

  Status value(std::string& out, int depth) {
    if (depth > kMaxDepth) return error("nested too deeply");
    if (pos_ >= in_.size()) return error("expected a value");
    const char c = in_[pos_];
    if (c == '"') {
      std::string text;
      HIPPO_RETURN_IF_ERROR(string_literal(text));
      if (!is_valid_utf8(text)) return error("string is not UTF-8");
      append_python_json_string(text, out);
      return {};
    }
    if (c == '{' || c == '[') {
      const char close = c == '{' ? '}' : ']';
      ++pos_;
      out.push_back(c);
      skip_space();
      if (pos_ < in_.size() && in_[pos_] == close) {
        ++pos_;
        out.push_back(close);
        return {};
      }
      for (bool first = true;; first = false) {
        if (!first) out.append(", ");
        skip_space();
        if (c == '{') {
          if (pos_ >= in_.size() || in_[pos_] != '"') return error("expected a key");
          std::string key;
          HIPPO_RETURN_IF_ERROR(string_literal(key));
          if (!is_valid_utf8(key)) return error("key is not UTF-8");
          append_python_json_string(key, out);
          skip_space();
          if (pos_ >= in_.size() || in_[pos_] != ':') return error("expected ':'");
          ++pos_;
          out.append(": ");
          skip_space();
        }
        HIPPO_RETURN_IF_ERROR(value(out, depth + 1));
        skip_space();
        if (pos_ < in_.size() && in_[pos_] == ',') {
          ++pos_;
          continue;
        }
        if (pos_ < in_.size() && in_[pos_] == close) {
          ++pos_;
          out.push_back(close);
          return {};
        }
        return error("expected ',' or a closing bracket");
      }
    }
    if (literal("true")) { out.append("true"); return {}; }
    if (literal("false")) { out.append("false"); return {}; }
    if (literal("null")) { out.append("null"); return {}; }
    return number(out);
  }

  std::string_view in_;
  std::size_t pos_ = 0;
};

}  // namespace

Result<std::string> to_python_json(std::string_view json) {
  std::string out;
  HIPPO_RETURN_IF_ERROR(Reformatter(json).run(out));
  return out;
}

void append_python_json_string(std::string_view utf8, std::string& out) {
  out.push_back('"');
  for (const char c : utf8) {
    switch (c) {
      case '"': out.append("\\\""); break;
      case '\\': out.append("\\\\"); break;
      case '\n': out.append("\\n"); break;
      case '\r': out.append("\\r"); break;
      case '\t': out.append("\\t"); break;
      case '\b': out.append("\\b"); break;
      case '\f': out.append("\\f"); break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out.append(fmt::format("\\u{:04x}", static_cast<unsigned>(c)));
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
}

Result<std::vector<JsonMember>> json_object_members(std::string_view json) {
  std::string ignored;
  HIPPO_RETURN_IF_ERROR(Reformatter(json).run(ignored));  // validates the whole text first
  Reformatter reader(json);
  std::vector<JsonMember> members;
  HIPPO_RETURN_IF_ERROR(reader.object_members(members));
  return members;
}

}  // namespace hippo::tokenizer
