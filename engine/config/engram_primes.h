// The prime sizes of the Engram hash tables (design/deepseek-v41-architecture.md §5.3).
//
// Every (Engram layer, n-gram order, head) owns a sub-table whose size is a prime; the primes are the
// successive primes >= engram_vocab_size, each used once, taken in the order layer -> order -> head.
// A layer's table (`layers.L.engram.embed.weight`) stacks its sub-tables, so its row count is the sum
// of its primes: 384,006,168 and 384,016,682 for the release (engram_vocab_size 16,000,000). The
// forward pass needs the same primes and running offsets to turn hashes into rows.
#pragma once

#include <cstdint>
#include <vector>

namespace hippo::engine {

// primes[i][k]: sub-table k = order_index * n_heads + head of the i-th Engram layer, for
// n_layers Engram layers with (max_ngram_size - 1) orders of n_heads heads each.
std::vector<std::vector<int64_t>> engram_table_primes(int64_t vocab_size, int64_t n_layers, int64_t max_ngram_size,
                                                      int64_t n_heads);

bool is_prime(int64_t n);

}  // namespace hippo::engine
