// Helpers for the tests that compare the engine with files the reference wrote: tensors and the JSON
// metadata of a golden safetensors file, file digests, and the committed demo checkpoint set up as
// `hippo serve` sets it up (with the tokenizer beside it).
#pragma once

#include "engine/weights/safetensors.h"
#include "tests/engine/test_paths.h"

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <openssl/sha.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

namespace hippo::engine::testing {

template <typename T>
std::vector<T> golden_tensor(const SafetensorsFile& file, const std::string& name, std::vector<int64_t>* shape = nullptr) {
  for (const SafetensorsEntry& e : file.entries()) {
    if (e.name != name) continue;
    std::vector<T> out(e.size / sizeof(T));
    std::memcpy(out.data(), file.data(e).data(), e.size);
    if (shape != nullptr) *shape = e.shape;
    return out;
  }
  FAIL("golden tensor " << name << " missing");
  return {};
}

// The header's __metadata__[key], a JSON document stored as a string.
inline boost::json::value golden_metadata(const SafetensorsFile& file, const std::string& key) {
  const auto bytes = file.file().bytes();
  uint64_t header_size = 0;
  std::memcpy(&header_size, bytes.data(), 8);
  const std::string_view header(reinterpret_cast<const char*>(bytes.data()) + 8, header_size);
  return boost::json::parse(boost::json::parse(header).at("__metadata__").at(key).as_string());
}

inline std::string sha256_of_file(const std::string& path) {
  const std::string bytes = read_file(path);
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), digest);
  std::string hex;
  for (unsigned char b : digest) hex += fmt::format("{:02x}", b);
  return hex;
}

// A checkpoint committed in the source tree (e.g. "models/demo") copied into dir / "model" with the
// tokenizer beside it, as `hippo serve` copies it.
inline std::string copy_committed(const TempDir& dir, const std::string& committed) {
  namespace fs = std::filesystem;
  const fs::path source = fs::path(test_data("../..")) / committed;
  const fs::path out = dir / "model";
  fs::create_directories(out);
  for (const fs::directory_entry& entry : fs::directory_iterator(source)) fs::copy_file(entry.path(), out / entry.path().filename());
  for (const char* name : {"tokenizer.json", "tokenizer_config.json"}) fs::copy_file(fs::path(tokenizer_dir()) / name, out / name);
  return out.string();
}

}  // namespace hippo::engine::testing
