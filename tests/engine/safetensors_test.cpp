// Safetensors shards: round trips through the writer and the mapped reader, and every malformed
// shard is an error naming the shard and the tensor, never a crash.
#include "engine/weights/safetensors.h"
#include "engine/weights/safetensors_writer.h"
#include "tests/engine/test_paths.h"

#include <catch2/catch.hpp>

#include <cstring>

using namespace hippo::engine;
using hippo::engine::testing::read_file;
using hippo::engine::testing::TempDir;
using hippo::engine::testing::write_file;

namespace {

std::vector<std::byte> bytes_of(std::initializer_list<int> values) {
  std::vector<std::byte> out;
  for (int v : values) out.push_back(static_cast<std::byte>(v));
  return out;
}

template <typename T>
std::vector<std::byte> bytes_of_values(std::initializer_list<T> values) {
  std::vector<std::byte> out(values.size() * sizeof(T));
  std::memcpy(out.data(), std::data(values), out.size());
  return out;
}

// A shard image from a raw header text and a data section.
std::string shard_image(const std::string& header, const std::string& data) {
  std::string image(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(image.data(), &n, 8);
  return image + header + data;
}

std::string parse_error(const std::string& image) {
  std::span<const std::byte> span(reinterpret_cast<const std::byte*>(image.data()), image.size());
  auto parsed = parse_safetensors(span, "shard.safetensors");
  return parsed.ok() ? "" : parsed.status().message();
}

}  // namespace

TEST_CASE("a written shard reads back with its dtypes, shapes and bytes, aligned", "[safetensors]") {
  TempDir dir;
  std::vector<ShardTensor> tensors;
  tensors.push_back({"scales", DType::kF8E8M0, {3}, bytes_of({127, 128, 129})});
  tensors.push_back({"w.bf16", DType::kBF16, {2, 2}, bytes_of({0x80, 0x3F, 0, 0x40, 0, 0, 0x40, 0xC0})});
  tensors.push_back({"ids", DType::kI64, {2}, bytes_of_values<int64_t>({7, -1})});
  tensors.push_back({"x", DType::kF32, {1}, bytes_of_values<float>({0.25f})});
  tensors.push_back({"empty", DType::kF32, {0, 4}, {}});
  REQUIRE(write_safetensors(dir / "a.safetensors", tensors).ok());

  auto shard = SafetensorsFile::open(dir / "a.safetensors");
  REQUIRE(shard.ok());
  REQUIRE(shard->entries().size() == 5);
  for (const ShardTensor& t : tensors) {
    auto it = std::find_if(shard->entries().begin(), shard->entries().end(),
                           [&](const SafetensorsEntry& e) { return e.name == t.name; });
    REQUIRE(it != shard->entries().end());
    CHECK(it->dtype == t.dtype);
    CHECK(it->shape == t.shape);
    CHECK(it->offset % static_cast<uint64_t>(dtype_size(t.dtype)) == 0);
    auto data = shard->data(*it);
    CHECK(std::vector<std::byte>(data.begin(), data.end()) == t.data);
  }
  // Largest elements first: I64, then F32, BF16, bytes.
  CHECK(shard->entries().front().name == "ids");
  CHECK(shard->entries().back().name == "scales");
  const std::string image = read_file(dir / "a.safetensors");
  CHECK(shard->file().size() == image.size());
  uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, image.data(), 8);
  CHECK(header_bytes % 8 == 0);  // the data section starts 8-aligned
  CHECK(image.substr(8, 31) == R"({"__metadata__":{"format":"pt"})");
  // Deterministic: writing again gives the same bytes.
  REQUIRE(write_safetensors(dir / "b.safetensors", tensors).ok());
  CHECK(read_file(dir / "a.safetensors") == read_file(dir / "b.safetensors"));
}

TEST_CASE("malformed shards are errors naming the shard and the tensor", "[safetensors]") {
  const std::string good_header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                  R"("b":{"dtype":"BF16","shape":[2],"data_offsets":[8,12]}})";
  const std::string data(12, '\x01');
  CHECK(parse_error(shard_image(good_header, data)).empty());

  CHECK_THAT(parse_error("abc"), Catch::Contains("shard.safetensors: truncated: 3 bytes"));
  CHECK_THAT(parse_error(shard_image(good_header, data).substr(0, 40)),
             Catch::Contains("shard.safetensors: truncated or not safetensors: header length"));
  // The last tensor runs past the end of the file: a truncated shard.
  CHECK_THAT(parse_error(shard_image(good_header, data.substr(0, 10))),
             Catch::Contains("shard.safetensors: tensor b: bytes [8, 12) run past the end of the data section (10 "
                             "bytes): the shard is truncated"));
  CHECK_THAT(parse_error(shard_image("{\"a\":", data)), Catch::Contains("header is not valid JSON"));
  CHECK_THAT(parse_error(shard_image(R"({"a":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", std::string(8, 'x'))),
             Catch::Contains("tensor a: unsupported dtype 'F64'"));
  CHECK_THAT(parse_error(shard_image(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", std::string(8, 'x'))),
             Catch::Contains("tensor a: data_offsets [0, 8] hold 8 bytes, but F32 [3] needs 12"));
  CHECK_THAT(parse_error(shard_image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", std::string(8, 'x'))),
             Catch::Contains("tensor a: data_offsets are not two non-negative integers with begin <= end"));
  CHECK_THAT(parse_error(shard_image(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", std::string(8, 'x'))),
             Catch::Contains("tensor a: shape holds something other than non-negative integers"));
  CHECK_THAT(parse_error(shard_image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                     R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                                     std::string(8, 'x'))),
             Catch::Contains("tensor b: bytes [4, 8) overlap tensor a"));
  CHECK_THAT(parse_error(shard_image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", std::string(8, 'x'))),
             Catch::Contains("tensor a: starts at byte 4 but the previous tensor ends at 0: gap"));
  CHECK_THAT(parse_error(shard_image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", std::string(8, 'x'))),
             Catch::Contains("shard.safetensors: 4 bytes after the last tensor"));
  CHECK_THAT(parse_error(shard_image("[1, 2]", "")), Catch::Contains("header is not a JSON object"));
  CHECK_THAT(parse_error(shard_image(R"({"a":{"shape":[1],"data_offsets":[0,4]}})", std::string(4, 'x'))),
             Catch::Contains("tensor a: dtype missing"));
  // A header length field of 2^64 - 1 is refused before any allocation.
  std::string huge(8, '\xff');
  CHECK_THAT(parse_error(huge + "{}"), Catch::Contains("header length 18446744073709551615 exceeds"));
}

TEST_CASE("opening a missing or empty file is a clear error", "[safetensors]") {
  TempDir dir;
  auto missing = SafetensorsFile::open(dir / "nope.safetensors");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == hippo::ErrorCode::kNotFound);
  CHECK_THAT(missing.status().message(), Catch::Contains("nope.safetensors: cannot be opened"));
  write_file(dir / "empty.safetensors", "");
  auto empty = SafetensorsFile::open(dir / "empty.safetensors");
  REQUIRE_FALSE(empty.ok());
  CHECK_THAT(empty.status().message(), Catch::Contains("empty.safetensors: truncated: 0 bytes"));
}

TEST_CASE("every truncation and every single-byte corruption of a shard is handled", "[safetensors]") {
  const std::string header = R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                             R"("b":{"dtype":"F8_E4M3","shape":[2,2],"data_offsets":[8,12]}})";
  const std::string image = shard_image(header, std::string(12, '\x3c'));
  REQUIRE(parse_error(image).empty());
  for (size_t length = 0; length < image.size(); ++length) {
    INFO(length);
    CHECK_FALSE(parse_error(image.substr(0, length)).empty());
  }
  int still_valid = 0;
  for (size_t i = 0; i < image.size(); ++i) {
    for (char replacement : {'\0', '9', '"', '\xff', '}'}) {
      std::string corrupt = image;
      corrupt[i] = replacement;
      still_valid += parse_error(corrupt).empty();  // an error or a consistent shard; never a crash
    }
  }
  CHECK(still_valid > 0);  // e.g. data bytes, which the header does not constrain
}
