// The embedded default model of `hippo serve` and `hippo run`: the trained demo checkpoint committed
// in the source tree (models/demo: scripts/train_demo.py made it, its README.md says how), copied
// with the tokenizer that scripts/setup fetched into models/default under the working directory.
#pragma once

#include "base/status.h"

#include <string>

namespace hippo::cli {

// Where scripts/setup puts the DeepSeek V4 tokenizer, in the source tree this binary was built from.
std::string default_tokenizer_dir();

// models/default (under the working directory), after copying the demo checkpoint and the tokenizer
// (from tokenizer_dir) there unless it already holds this very checkpoint (its provenance.json is the
// committed one). An older default (the random `tiny` checkpoint of earlier versions) is replaced. The
// copy goes to a temporary folder first, so that an interrupted copy never leaves a half checkpoint
// where the next start would load it.
Result<std::string> ensure_default_model(const std::string& tokenizer_dir);

}  // namespace hippo::cli
