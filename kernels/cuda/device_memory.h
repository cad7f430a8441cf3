// Owners of device resources for the host side of kernels/cuda: one allocation, one event.
// Freeing can only fail on a broken context, which the next checked call reports, so its status is
// dropped. Plain C++17 over the runtime API (gpu_runtime.h), for the .cu files and the backend alike.
#pragma once

#include "kernels/cuda/gpu_runtime.h"

#include <cstddef>
#include <utility>

namespace hippo::kernels::cuda {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, std::size_t{0})) {}
  ~DeviceBuffer() { release(); }

  // Replaces the allocation with one of `bytes` bytes (at least one), its contents undefined.
  cudaError_t allocate(std::size_t bytes) {
    release();
    const cudaError_t status = cudaMalloc(&data_, bytes > 0 ? bytes : 1);
    if (status == cudaSuccess)
      bytes_ = bytes;
    else
      data_ = nullptr;
    return status;
  }
  void* data() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  std::size_t bytes() const { return bytes_; }

 private:
  void release() {
    if (data_ != nullptr) static_cast<void>(cudaFree(data_));
    data_ = nullptr;
    bytes_ = 0;
  }

  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

class Event {
 public:
  Event() = default;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event() {
    if (created_) static_cast<void>(cudaEventDestroy(event_));
  }
  cudaError_t create() {
    const cudaError_t status = cudaEventCreate(&event_);
    created_ = status == cudaSuccess;
    return status;
  }
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_{};
  bool created_ = false;
};

}  // namespace hippo::kernels::cuda
