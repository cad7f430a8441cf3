// The reference backend: the scalar twin of every op of backend.h, written for obviousness, not
// speed. Weights and entries are decoded by the scalar decoders of numeric_formats.h, every
// reduction is accumulated in double and rounded to float once at the end of the op, and top-k is
// a stable sort. It is the truth the other backends are measured against op by op
// (tests/kernels/backend_ops_test.cpp); its KV entries are the snapshot format bit for bit.
#pragma once

#include "kernels/backend.h"

#include <memory>

namespace hippo::kernels::ref {

// name "ref", one thread, every op, weight format and table format.
std::unique_ptr<Backend> make_ref_backend();

}  // namespace hippo::kernels::ref
