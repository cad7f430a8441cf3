// Built-in model configs for `hippo model init`: small checkpoints in the V4.1 release layout that the
// engine and its tests run on. The presets use the real 129,280-token vocabulary (the real DeepSeek V4
// tokenizer ships with them) and the release's special ids.
//
//   tiny          every structural feature of the release at small width: 12 layers = window-only
//                 layers 0-1, ratio-2 KV writers 2 and 4 with a reusing layer between and after them,
//                 the ratio-1 candidate source 7 with reusing layers 8 and 10, reindex layers 9 and 11,
//                 Engram at 1 and 4, 8 routed experts (top 2) + 1 shared, 3 DSpark stages, a 2-block
//                 vision tower.
//   small-fullkv  the release's attention geometry (head_dim 512, rope 64, 128-d index keys, writers
//                 2, 8, 14, 20 of 40 layers, the release's index sources and candidate settings), so its
//                 compressed KV is exactly 890 B/token; everything else narrow.
//   wide          the release's geometry at full width (hidden 5120, 64 heads x 512, 32 index heads x 128,
//                 top-512, 2,048 candidate blocks of 8, experts 5120 x 2304) on four layers with four
//                 routed experts and no DSpark stages: the code paths and kernel shapes the narrow
//                 presets never reach, in about 3.3 GB.
//   demo          tiny's schedule at hidden 64 with 8 heads and top-64 index selection: the shapes of
//                 the trained demo model (scripts/train_demo.py), which starts from this init.
#pragma once

#include "base/status.h"
#include "engine/config/model_config.h"

#include <string_view>
#include <vector>

namespace hippo::engine {

std::vector<std::string_view> preset_names();

// The preset's config, quantised (quantization_config as in the release) or plain (none).
Result<ModelConfig> preset_config(std::string_view name, bool quantised);

}  // namespace hippo::engine
