// The CUDA backend of the op layer (kernels/backend.h): every op runs on the GPU.
//
// Today the op layer's buffers are the caller's host arrays, so each op copies its inputs to the
// device, runs its kernels and copies its outputs back before it returns. The model's weights are
// the exception: Backend::keep_weight uploads them once at load, and linear reads them in place
// there. The indexer's top-k runs on the host over the scores the device computed. Keeping
// activations and session state resident on the device is the next step (docs/engine.md).
#pragma once

#include "base/status.h"
#include "kernels/backend.h"

#include <memory>

namespace hippo::kernels::cuda {

// The backend on CUDA device `device`; an error (kUnavailable) where this machine has no such
// device or no working driver, with the runtime's reason.
Result<std::unique_ptr<Backend>> make_cuda_backend(int device);

}  // namespace hippo::kernels::cuda
