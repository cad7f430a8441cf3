// Validation of weight views: the one place that knows each format's shape rules.
#include "kernels/weight_view.h"

namespace hippo::kernels {

const char* weight_format_name(WeightFormat format) {
  switch (format) {
    case WeightFormat::kF32: return "f32";
    case WeightFormat::kBF16: return "bf16";
    case WeightFormat::kFp8Block: return "fp8-e4m3-block";
    case WeightFormat::kFp4Row32: return "fp4-e2m1-row32";
  }
  return "unknown";
}

Status WeightView::validate() const {
  const char* name = weight_format_name(format);
  if (rows <= 0 || cols <= 0)
    return make_error(ErrorCode::kInvalidArgument, "{} weight: shape [{}, {}] is empty", name, rows, cols);
  if (data == nullptr) return make_error(ErrorCode::kInvalidArgument, "{} weight: no data", name);
  switch (format) {
    case WeightFormat::kF32:
    case WeightFormat::kBF16:
      return {};
    case WeightFormat::kFp8Block:
      if (block <= 0) return make_error(ErrorCode::kInvalidArgument, "{} weight: block size {} is not positive", name, block);
      break;
    case WeightFormat::kFp4Row32:
      if (cols % 32 != 0)
        return make_error(ErrorCode::kInvalidArgument, "{} weight: {} columns is not a multiple of 32", name, cols);
      break;
  }
  if (scales == nullptr) return make_error(ErrorCode::kInvalidArgument, "{} weight: no scales", name);
  return {};
}

}  // namespace hippo::kernels
