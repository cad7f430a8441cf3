// Dispatch on the tensor's storage kind onto the exact decoders (kernels/ref, through dequant.h).
#include "engine/weights/float_tensor.h"

#include "base/check.h"
#include "engine/weights/dequant.h"
#include "kernels/ref/numeric_formats.h"

#include <cstring>
#include <string>

namespace hippo::engine {
namespace {

std::span<const uint8_t> as_u8(std::span<const std::byte> bytes) {
  return {reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()};
}

std::string scale_name(const std::string& weight_name) {
  const std::string suffix = ".weight";
  HIPPO_CHECK(weight_name.size() > suffix.size() &&
                  weight_name.compare(weight_name.size() - suffix.size(), suffix.size(), suffix) == 0,
              "tensor_to_float: a quantised weight's name ends in .weight");
  return weight_name.substr(0, weight_name.size() - suffix.size()) + ".scale";
}

}  // namespace

std::vector<float> tensor_to_float(const Checkpoint& checkpoint, std::string_view name) {
  const TensorView view = checkpoint.tensor(name);
  const TensorSpec& spec = *view.spec;
  const int64_t n = element_count(spec.logical_shape);
  std::vector<float> out(static_cast<size_t>(n));
  switch (spec.storage) {
    case Storage::kValues:
      if (spec.dtype == DType::kF32) {
        std::memcpy(out.data(), view.bytes.data(), out.size() * sizeof(float));
      } else {
        HIPPO_CHECK(spec.dtype == DType::kBF16, "tensor_to_float: values must be F32 or BF16");
        for (size_t i = 0; i < out.size(); ++i) {
          uint16_t bits;
          std::memcpy(&bits, view.bytes.data() + 2 * i, 2);
          out[i] = kernels::ref::bf16_to_f32(bits);
        }
      }
      break;
    case Storage::kFp8Codes: {
      const TensorView scales = checkpoint.tensor(scale_name(spec.name));
      dequantize_fp8(as_u8(view.bytes), as_u8(scales.bytes), spec.logical_shape[0], spec.logical_shape[1],
                     spec.block[0], spec.block[1], out);
      break;
    }
    case Storage::kFp4Codes: {
      const TensorView scales = checkpoint.tensor(scale_name(spec.name));
      dequantize_fp4(as_u8(view.bytes), as_u8(scales.bytes), spec.logical_shape[0], spec.logical_shape[1], out);
      break;
    }
    case Storage::kFp8Scales:
    case Storage::kFp4Scales: HIPPO_CHECK(false, "tensor_to_float: scales are read with their weight");
  }
  return out;
}

}  // namespace hippo::engine
