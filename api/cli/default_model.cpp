#include "api/cli/default_model.h"

#include "base/log.h"

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace hippo::cli {
namespace {

namespace fs = std::filesystem;

constexpr const char* kProvenance = "provenance.json";
constexpr const char* kDefaultModelDir = "models/default";  // relative to the working directory

fs::path demo_dir() { return fs::path(HIPPO_SOURCE_DIR) / "models" / "demo"; }

// A small text file's bytes, or nothing when it cannot be read.
std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return in ? bytes.str() : std::string();
}

Status copy_into(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
  if (ec) return make_error(ErrorCode::kIoError, "cannot copy {} to {}: {}", from.string(), to.string(), ec.message());
  return Status::ok_status();
}

}  // namespace

std::string default_tokenizer_dir() { return std::string(HIPPO_SOURCE_DIR) + "/.cache/deepseek-v4-tokenizer"; }

Result<std::string> ensure_default_model(const std::string& tokenizer_dir) {
  const fs::path source = demo_dir();
  const std::string provenance = read_file(source / kProvenance);
  if (provenance.empty())
    return make_error(ErrorCode::kNotFound, "the embedded default model is missing from the source tree: no {}",
                      (source / kProvenance).string());
  const fs::path target = kDefaultModelDir;
  if (read_file(target / kProvenance) == provenance) return target.string();

  log::info("copying the embedded default model", {{"from", source.string()}, {"dir", target.string()},
                                                   {"tokenizer", tokenizer_dir}});
  std::error_code ec;
  const fs::path partial = fmt::format("{}.partial-{}", target.string(), ::getpid());
  fs::remove_all(partial, ec);
  fs::create_directories(partial, ec);
  if (ec) return make_error(ErrorCode::kIoError, "cannot create {}: {}", partial.string(), ec.message());
  uint64_t bytes = 0;
  for (const fs::directory_entry& entry : fs::directory_iterator(source, ec)) {
    if (!entry.is_regular_file() || entry.path().extension() == ".md") continue;
    HIPPO_RETURN_IF_ERROR(copy_into(entry.path(), partial / entry.path().filename()));
    bytes += entry.file_size();
  }
  if (ec) return make_error(ErrorCode::kIoError, "cannot list {}: {}", source.string(), ec.message());
  for (const char* name : {"tokenizer.json", "tokenizer_config.json"})
    HIPPO_RETURN_IF_ERROR(copy_into(fs::path(tokenizer_dir) / name, partial / name));

  // An older default moves aside first: a folder cannot be renamed over a non-empty one.
  const fs::path old = fmt::format("{}.old-{}", target.string(), ::getpid());
  if (fs::exists(target, ec)) fs::rename(target, old, ec);
  fs::create_directories(target.parent_path(), ec);
  fs::rename(partial, target, ec);
  if (ec && read_file(target / kProvenance) != provenance)
    return make_error(ErrorCode::kIoError, "cannot move the default model from {} to {}: {}", partial.string(),
                      target.string(), ec.message());
  fs::remove_all(partial, ec);  // another process won the race
  fs::remove_all(old, ec);
  log::info("embedded default model copied", {{"dir", target.string()}, {"bytes", bytes}});
  return target.string();
}

}  // namespace hippo::cli
