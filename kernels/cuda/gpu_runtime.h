// The one include through which kernel sources reach the GPU runtime. A CUDA build gets CUDA; a
// HIP build (HIPPO_HIP) gets the same names mapped onto HIP by kernels/hip/hip_compat.h, so the
// .cu files are the single kernel set for both vendors.
#pragma once

#if defined(HIPPO_HIP)
#include "kernels/hip/hip_compat.h"
#else
#include <cuda_runtime.h>
#endif
