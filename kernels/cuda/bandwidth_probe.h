// Device memory bandwidth of a CUDA GPU (STREAM triad), the physical limit GPU benchmarks cite.
// Plain C++ interface so that code outside kernels/cuda never includes CUDA headers.
#pragma once

#include <cstddef>
#include <string>

namespace hippo::kernels::cuda {

struct DeviceBandwidth {
  bool ok = false;
  std::string error;              // set when !ok: no device, allocation failed, wrong result
  std::string device_name;
  double triad_bytes_per_second = 0;  // 3 arrays counted, best of the timed passes
};

DeviceBandwidth measure_device_bandwidth(std::size_t bytes_per_array, int repetitions);

}  // namespace hippo::kernels::cuda
