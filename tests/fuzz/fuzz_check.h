// Invariant checks of the fuzz targets: on in every build (the corpus replay runs in release
// builds too), and an abort, which libFuzzer reports as a crash with the input that caused it.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#define HIPPO_FUZZ_CHECK(condition, detail)                                                           \
  do {                                                                                                \
    if (!(condition)) {                                                                               \
      const std::string hippo_fuzz_detail = (detail);                                                 \
      std::fprintf(stderr, "%s:%d: fuzz invariant failed: %s\n  %s\n", __FILE__, __LINE__, #condition, \
                   hippo_fuzz_detail.c_str());                                                        \
      std::abort();                                                                                   \
    }                                                                                                 \
  } while (false)
