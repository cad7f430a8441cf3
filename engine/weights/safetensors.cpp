// Header parsing and the checks (1)-(4) of safetensors.h.
#include "engine/weights/safetensors.h"

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <bit>
#include <cstring>
#include <filesystem>

namespace hippo::engine {
namespace json = boost::json;

namespace {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

// The safetensors format caps the header at 100 MB; a bigger length field is corruption.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

Status entry_error(std::string_view shard, std::string_view tensor, const std::string& what) {
  return make_error(ErrorCode::kCorrupt, "{}: tensor {}: {}", shard, tensor, what);
}

Result<uint64_t> read_uint(const json::value& v) {
  if (v.is_uint64()) return v.get_uint64();
  if (v.is_int64() && v.get_int64() >= 0) return static_cast<uint64_t>(v.get_int64());
  return Status(ErrorCode::kCorrupt, "not a non-negative integer");
}

Result<SafetensorsEntry> parse_entry(std::string_view shard, std::string_view name, const json::value& v) {
  if (!v.is_object()) return entry_error(shard, name, "header entry is not an object");
  const json::object& o = v.get_object();
  SafetensorsEntry entry;
  entry.name = std::string(name);

  const json::value* dtype = o.if_contains("dtype");
  if (dtype == nullptr || !dtype->is_string()) return entry_error(shard, name, "dtype missing or not a string");
  auto parsed = parse_dtype(std::string_view(dtype->get_string()));
  if (!parsed.ok()) return entry_error(shard, name, parsed.status().message());
  entry.dtype = *parsed;

  const json::value* shape = o.if_contains("shape");
  if (shape == nullptr || !shape->is_array()) return entry_error(shard, name, "shape missing or not an array");
  for (const json::value& d : shape->get_array()) {
    auto dim = read_uint(d);
    if (!dim.ok() || *dim > static_cast<uint64_t>(INT64_MAX))
      return entry_error(shard, name, "shape holds something other than non-negative integers");
    entry.shape.push_back(static_cast<int64_t>(*dim));
  }

  const json::value* offsets = o.if_contains("data_offsets");
  if (offsets == nullptr || !offsets->is_array() || offsets->get_array().size() != 2)
    return entry_error(shard, name, "data_offsets missing or not [begin, end]");
  auto begin = read_uint(offsets->get_array()[0]);
  auto end = read_uint(offsets->get_array()[1]);
  if (!begin.ok() || !end.ok() || *end < *begin)
    return entry_error(shard, name, "data_offsets are not two non-negative integers with begin <= end");

  const int64_t elements = element_count(entry.shape);
  if (elements < 0 || elements > INT64_MAX / dtype_size(entry.dtype))
    return entry_error(shard, name, fmt::format("shape {} is too large", shape_string(entry.shape)));
  const auto needed = static_cast<uint64_t>(elements * dtype_size(entry.dtype));
  if (*end - *begin != needed)
    return entry_error(shard, name,
                       fmt::format("data_offsets [{}, {}] hold {} bytes, but {} {} needs {}", *begin, *end,
                                   *end - *begin, dtype_name(entry.dtype), shape_string(entry.shape), needed));
  entry.offset = *begin;  // relative to the data section until the caller rebases it
  entry.size = needed;
  return entry;
}

}  // namespace

Result<std::vector<SafetensorsEntry>> parse_safetensors(std::span<const std::byte> file, std::string_view shard) {
  // (1) length field and header.
  if (file.size() < 8)
    return make_error(ErrorCode::kCorrupt, "{}: truncated: {} bytes, too short for the 8-byte header length", shard,
                      file.size());
  uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, file.data(), 8);
  if (header_bytes > kMaxHeaderBytes || header_bytes > file.size() - 8)
    return make_error(ErrorCode::kCorrupt, "{}: truncated or not safetensors: header length {} exceeds the file ({} bytes)",
                      shard, header_bytes, file.size());
  std::string_view header(reinterpret_cast<const char*>(file.data() + 8), header_bytes);
  boost::system::error_code ec;
  json::value root = json::parse(header, ec);
  if (ec) return make_error(ErrorCode::kCorrupt, "{}: header is not valid JSON ({})", shard, ec.message());
  if (!root.is_object()) return make_error(ErrorCode::kCorrupt, "{}: header is not a JSON object", shard);

  // (2) entries.
  std::vector<SafetensorsEntry> entries;
  for (const auto& kv : root.get_object()) {
    if (kv.key() == "__metadata__") continue;
    HIPPO_ASSIGN_OR_RETURN(auto entry, parse_entry(shard, std::string_view(kv.key()), kv.value()));
    entries.push_back(std::move(entry));
  }

  // (3) and (4): inside the data section, tiling it exactly.
  const uint64_t data_start = 8 + header_bytes;
  const uint64_t data_size = file.size() - data_start;
  std::sort(entries.begin(), entries.end(),
            [](const SafetensorsEntry& a, const SafetensorsEntry& b) { return a.offset < b.offset; });
  uint64_t covered = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    const SafetensorsEntry& e = entries[i];
    if (e.offset + e.size > data_size)
      return entry_error(shard, e.name,
                         fmt::format("bytes [{}, {}) run past the end of the data section ({} bytes): the shard is "
                                     "truncated",
                                     e.offset, e.offset + e.size, data_size));
    if (e.offset < covered)
      return entry_error(shard, e.name,
                         fmt::format("bytes [{}, {}) overlap tensor {}", e.offset, e.offset + e.size, entries[i - 1].name));
    if (e.offset > covered)
      return entry_error(shard, e.name,
                         fmt::format("starts at byte {} but the previous tensor ends at {}: gap in the data section",
                                     e.offset, covered));
    covered = e.offset + e.size;
  }
  if (covered != data_size)
    return make_error(ErrorCode::kCorrupt, "{}: {} bytes after the last tensor (data section {} bytes, tensors {})",
                      shard, data_size - covered, data_size, covered);
  for (SafetensorsEntry& e : entries) e.offset += data_start;
  return entries;
}

Result<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  HIPPO_ASSIGN_OR_RETURN(MappedFile file, MappedFile::open(path));
  const std::string shard = std::filesystem::path(path).filename().string();
  HIPPO_ASSIGN_OR_RETURN(auto entries, parse_safetensors(file.bytes(), shard));
  return SafetensorsFile(std::move(file), std::move(entries));
}

}  // namespace hippo::engine
