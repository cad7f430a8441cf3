// Whether this build's GPU backend can run here. CTest reads exit code 77 as "skipped", so on a
// machine without a GPU the test summary says plainly that the GPU checks did not run (the Catch2
// cases that would use the GPU warn and leave it out). It links the GPU library alone, so CI can
// check that the backend links without building the CPU kernels again.
#include "kernels/cuda/cuda_backend.h"

#include <cstdio>

int main() {
  auto made = hippo::kernels::cuda::make_cuda_backend(0);
  if (!made.ok()) {
    std::printf("the GPU backend cannot run here, so its parity tests did not run: %s\n", made.status().to_string().c_str());
    return 77;
  }
  std::printf("the GPU backend runs here (%s): its parity tests run with the others\n", (*made)->name());
  return 0;
}
