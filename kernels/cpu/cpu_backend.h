// The CPU backend: kernels/cpu behind the op table of kernels/backend.h, with its thread pool.
#pragma once

#include "kernels/backend.h"

#include <memory>

namespace hippo::kernels::cpu {

// threads: 0 means one per logical CPU.
std::unique_ptr<Backend> make_cpu_backend(int threads);

}  // namespace hippo::kernels::cpu
