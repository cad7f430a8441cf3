// TEMPORARY (not for commit): identity map and fixed multipliers until engine/engram lands.
#include "engine/model/engram_hashing.h"

#include "engine/config/engram_primes.h"
#include "engine/model/session_state.h"

#include <vector>

namespace hippo::engine {

struct EngramHashing::Impl {
  int64_t n_layers = 0, max_ngram = 0, heads = 0;
  std::vector<std::vector<int64_t>> primes, offsets, multipliers;
  int32_t pad = 2;
};

EngramHashing::EngramHashing(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
EngramHashing::~EngramHashing() = default;

Result<std::unique_ptr<EngramHashing>> EngramHashing::create(const TextConfig& text, const std::string&) {
  auto impl = std::make_unique<Impl>();
  impl->n_layers = static_cast<int64_t>(text.engram_layer_ids.size());
  impl->max_ngram = text.engram_max_ngram_size;
  impl->heads = text.engram_n_heads;
  const int64_t per_layer = (impl->max_ngram - 1) * impl->heads;
  int64_t p = text.engram_vocab_size;
  for (int64_t l = 0; l < impl->n_layers; ++l) {
    std::vector<int64_t> primes, offsets;
    int64_t total = 0;
    for (int64_t c = 0; c < per_layer; ++c) {
      const int64_t rows = text.engram_num_embeddings[static_cast<size_t>(l)] / per_layer;
      primes.push_back(rows);
      offsets.push_back(total);
      total += rows;
      ++p;
    }
    impl->primes.push_back(primes);
    impl->offsets.push_back(offsets);
    impl->multipliers.push_back({3, 5, 7, 11, 13, 17});
  }
  return std::unique_ptr<EngramHashing>(new EngramHashing(std::move(impl)));
}

int64_t EngramHashing::n_layers() const { return impl_->n_layers; }
int64_t EngramHashing::n_columns() const { return (impl_->max_ngram - 1) * impl_->heads; }
int64_t EngramHashing::lookback() const { return impl_->max_ngram - 1; }
int32_t EngramHashing::compressed_id(int32_t token) const { return token; }

void EngramHashing::rows(int32_t current, std::span<const int32_t> previous, int64_t* rows) const {
  for (int64_t l = 0; l < impl_->n_layers; ++l) {
    std::vector<int64_t> tokens{current};
    bool blocked = false;
    for (int32_t p : previous) {
      blocked = blocked || p == kEngramDead;
      tokens.push_back(blocked ? impl_->pad : p);
    }
    int64_t rolling = tokens[0] * impl_->multipliers[l][0];
    for (int64_t n = 1; n < impl_->max_ngram; ++n) {
      rolling ^= tokens[static_cast<size_t>(n)] * impl_->multipliers[l][static_cast<size_t>(n)];
      for (int64_t h = 0; h < impl_->heads; ++h) {
        const int64_t c = (n - 1) * impl_->heads + h;
        rows[l * n_columns() + c] = rolling % impl_->primes[l][static_cast<size_t>(c)] + impl_->offsets[l][static_cast<size_t>(c)];
      }
    }
  }
}

}  // namespace hippo::engine
