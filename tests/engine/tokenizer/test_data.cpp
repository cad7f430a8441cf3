// Loading of the shared test data (see test_data.h).
#include "tests/engine/tokenizer/test_data.h"

#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

namespace hippo::tokenizer::testing {

const Tokenizer& deepseek_tokenizer() {
  static const Result<Tokenizer> tokenizer =
      Tokenizer::load(std::filesystem::path(HIPPO_TOKENIZER_DIR) / "tokenizer.json");
  if (!tokenizer.ok()) FAIL(tokenizer.status().to_string());
  return *tokenizer;
}

std::filesystem::path golden_file(const std::string& name) {
  const std::filesystem::path path = std::filesystem::path(HIPPO_TOKENIZER_GOLDEN_DIR) / name;
  if (!std::filesystem::exists(path)) {
    FAIL("missing golden file " << path.string() << "; build the tokenizer_tests target, which runs scripts/gen_*.py");
  }
  return path;
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  std::ostringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

}  // namespace hippo::tokenizer::testing
