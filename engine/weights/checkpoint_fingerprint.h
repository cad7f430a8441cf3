// The model fingerprint that snapshots carry: a session's KV state is only meaningful to the
// model that computed it, and storage refuses to restore it into another (storage/store.h (4)).
#pragma once

#include "engine/weights/checkpoint.h"

#include <string>

namespace hippo::engine {

// xxh3-64 (16 hex digits) over config.json and, for every tensor of the table, its name, dtype,
// shape and the first and last 64 bytes of its data: another config, another layout or other
// weights (another seed of `hippo model init`) give another fingerprint, and computing it touches
// two pages per tensor, not the whole checkpoint.
Result<std::string> checkpoint_fingerprint(const Checkpoint& checkpoint);

}  // namespace hippo::engine
