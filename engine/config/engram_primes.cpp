// Prime search for the Engram table sizes: trial division is enough, the tables of the release need
// 48 primes near 1.6e7 (a few thousand divisions each).
#include "engine/config/engram_primes.h"

#include <cstddef>

namespace hippo::engine {

bool is_prime(int64_t n) {
  if (n < 2) return false;
  if (n % 2 == 0) return n == 2;
  for (int64_t d = 3; d * d <= n; d += 2)
    if (n % d == 0) return false;
  return true;
}

std::vector<std::vector<int64_t>> engram_table_primes(int64_t vocab_size, int64_t n_layers, int64_t max_ngram_size,
                                                      int64_t n_heads) {
  std::vector<std::vector<int64_t>> primes(static_cast<size_t>(n_layers));
  int64_t candidate = vocab_size;
  for (auto& layer : primes) {
    for (int64_t k = 0; k < (max_ngram_size - 1) * n_heads; ++k) {
      while (!is_prime(candidate)) ++candidate;
      layer.push_back(candidate++);
    }
  }
  return primes;
}

}  // namespace hippo::engine
