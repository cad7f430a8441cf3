// The backends this build has, by name, and the one place that makes them. engine/model gets its
// Backend from here at load, and tests/kernels/backend_ops_test.cpp runs every op of each of them
// against "ref".
#pragma once

#include "base/status.h"
#include "kernels/backend.h"

#include <memory>
#include <string>
#include <vector>

namespace hippo::kernels {

inline constexpr const char* kDefaultBackend = "cpu";

// "cpu" (kernels/cpu: SIMD per instruction set, multithreaded; the default) and "ref" (kernels/ref:
// the scalar twins, reductions in double; slow, for checks), in that order; then "cuda" in a build
// with the CUDA kernels (the `cuda` preset), whether or not this machine has a GPU.
std::vector<std::string> backend_names();

// Whether make_backend knows `name`: one of backend_names(), or the GPU backend with a device
// ("cuda:1"). Whether that GPU exists is make_backend's to find out.
bool is_backend_name(const std::string& name);

// threads: 0 means one per logical CPU (a backend without threads ignores it). "cuda:N" names GPU N
// ("cuda" is "cuda:0"); where it is missing, the error (kUnavailable) says why. An unknown name is
// an error that lists the known ones.
Result<std::unique_ptr<Backend>> make_backend(const std::string& name, int threads = 0);

}  // namespace hippo::kernels
