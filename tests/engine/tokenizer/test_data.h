// Where the tokenizer tests find their data: the real DeepSeek V4 tokenizer.json that scripts/setup
// puts in .cache/deepseek-v4-tokenizer, and the golden files that the reference implementations
// (HF `tokenizers`, deepseek-recipe) write into the build folder before the tests are built
// (tests/CMakeLists.txt). Missing data fails the test with the command that makes it; never skips.
#pragma once

#include "engine/tokenizer/tokenizer.h"

#include <filesystem>
#include <string>

namespace hippo::tokenizer::testing {

// The tokenizer, loaded once per test binary; FAILs the current test if it cannot be loaded.
const Tokenizer& deepseek_tokenizer();

// `name` inside the golden-data folder; FAILs the current test if it does not exist.
std::filesystem::path golden_file(const std::string& name);

// The whole contents of a file (binary).
std::string read_file(const std::filesystem::path& path);

}  // namespace hippo::tokenizer::testing
