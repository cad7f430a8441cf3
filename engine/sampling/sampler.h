// Choosing the next token from logits: greedy, or sampled with temperature, top-k, top-p and min-p
// from a seeded generator. The same seed and logits give the same token on every machine (the
// generator and the uniform draw are specified here, not left to the standard library).
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <vector>

namespace hippo::engine {

struct SamplingParams {
  double temperature = 0.0;  // 0: greedy (the lowest id among equal maxima)
  int64_t top_k = 0;         // 0: off
  double top_p = 1.0;        // 1: off
  double min_p = 0.0;        // 0: off; keeps tokens with p >= min_p * p_max
  std::optional<uint64_t> seed;  // none: one drawn at random (Sampler::seed() says which)
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params)
      : params_(params), seed_(params.seed ? *params.seed : random_seed()), generator_(seed_) {}

  int32_t next(std::span<const float> logits);
  // The seed in use: the one given, or the one drawn (reported, so that a run can be repeated).
  uint64_t seed() const { return seed_; }

 private:
  double uniform();  // [0, 1) from the top 53 bits of one draw
  static uint64_t random_seed();

  SamplingParams params_;
  uint64_t seed_;
  std::mt19937_64 generator_;
  std::vector<float> weights_;       // reused between tokens: a vocabulary's worth per call
  std::vector<float> block_totals_;  // the sums of weights_ per kernels::cpu::kExpBlock ids
};

// The lowest index among the largest values.
int32_t argmax(std::span<const float> logits);

}  // namespace hippo::engine
