// Speed and accuracy of the CUDA linear kernel (kernels/cuda/launch.h) on one shape, for
// `hippo bench`. Plain C++17 with no CUDA headers, so host code of any standard can include it.
#pragma once

#include <cstdint>
#include <string>

namespace hippo::kernels::cuda {

struct LinearTiming {
  bool ok = false;
  std::string error;                  // set when !ok: no device, a failed CUDA call
  std::string device_name;
  double copy_bytes_per_second = 0;   // device-to-device cudaMemcpy of a >= 1 GiB buffer, read + write bytes
  double seconds_per_call = 0;        // best of the timed repetitions, GPU events
  double weight_bytes = 0;            // bytes of W (codes + scales) read per call
  double max_error = 0;               // max over sampled outputs of |y - y_ref| / sum |x·w|, y_ref in double on the host
};

// format: 0 f32, 1 bf16, 2 fp8 (block 32), 3 fp4 row32 (packed). Random W (finite codes, scales in
// a small range) and x from `seed`. W is replicated in enough copies to exceed the L2 (>= 4 x 60 MB)
// and the calls rotate through them, so that every call reads HBM. A repetition is one pass over
// the copies; seconds_per_call is the best pass's time divided by its calls.
LinearTiming time_linear(int format, std::int64_t rows, std::int64_t cols, std::int64_t m, int repetitions,
                         std::uint64_t seed);

}  // namespace hippo::kernels::cuda
