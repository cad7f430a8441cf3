// Whether the GPU backend this build has can run here. CTest reads exit code 77 as "skipped", so on
// a machine without a GPU the test summary says plainly that the GPU checks did not run (the
// Catch2 cases that would use the GPU warn and leave it out).
#include "kernels/backend_registry.h"

#include <cstdio>

int main() {
  const std::string gpu = hippo::kernels::backend_names().back();  // a GPU build lists its GPU last
  auto made = hippo::kernels::make_backend(gpu);
  if (!made.ok()) {
    std::printf("the %s backend cannot run here, so its parity tests did not run: %s\n", gpu.c_str(),
                made.status().to_string().c_str());
    return 77;
  }
  std::printf("the %s backend runs here (%s): its parity tests run with the others\n", gpu.c_str(), (*made)->name());
  return 0;
}
