// The logical values of a checkpoint tensor as float32, whatever its storage: BF16 and F32 converted,
// FP8 linears and Engram rows dequantised with their block scales, packed FP4 experts with their
// per-32 scales. The scalar reference path of the forward pass reads weights through this; one call
// gives the same floats for a plain and a quantised checkpoint of one seed.
#pragma once

#include "engine/weights/checkpoint.h"

#include <string_view>
#include <vector>

namespace hippo::engine {

// `name` must be a table tensor holding values or codes (not a `.scale`), of a float dtype or FP8/FP4;
// anything else is a bug (checked). Returns the logical shape's elements, row-major.
std::vector<float> tensor_to_float(const Checkpoint& checkpoint, std::string_view name);

}  // namespace hippo::engine
