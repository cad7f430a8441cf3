// Shard serialisation: ordering, header JSON, padding, one sequential write.
#include "engine/weights/safetensors_writer.h"

#include "base/check.h"

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

namespace hippo::engine {
namespace {

// The header for tensors in data order, padded to a multiple of 8 bytes.
std::string safetensors_header(const std::vector<ShardTensor>& tensors) {
  std::string header = R"({"__metadata__":{"format":"pt"})";
  uint64_t offset = 0;
  for (const ShardTensor& t : tensors) {
    boost::json::array shape;
    for (int64_t d : t.shape) shape.push_back(d);
    header += fmt::format(R"(,{}:{{"dtype":"{}","shape":{},"data_offsets":[{},{}]}})",
                          boost::json::serialize(boost::json::value(t.name)), dtype_name(t.dtype),
                          boost::json::serialize(shape), offset, offset + t.data.size());
    offset += t.data.size();
  }
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');
  return header;
}

}  // namespace

Status write_safetensors(const std::string& path, std::vector<ShardTensor> tensors) {
  for (const ShardTensor& t : tensors)
    HIPPO_CHECK(static_cast<int64_t>(t.data.size()) == element_count(t.shape) * dtype_size(t.dtype),
                "write_safetensors: data size does not match dtype and shape");
  std::stable_sort(tensors.begin(), tensors.end(), [](const ShardTensor& a, const ShardTensor& b) {
    return dtype_size(a.dtype) > dtype_size(b.dtype);
  });
  const std::string header = safetensors_header(tensors);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return make_error(ErrorCode::kIoError, "{}: cannot be created ({})", path, std::strerror(errno));
  unsigned char length[8];
  uint64_t header_bytes = header.size();
  for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(header_bytes >> (8 * i));
  out.write(reinterpret_cast<const char*>(length), 8);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  for (const ShardTensor& t : tensors)
    out.write(reinterpret_cast<const char*>(t.data.data()), static_cast<std::streamsize>(t.data.size()));
  out.close();
  if (!out) return make_error(ErrorCode::kIoError, "{}: write failed ({})", path, std::strerror(errno));
  return {};
}

}  // namespace hippo::engine
