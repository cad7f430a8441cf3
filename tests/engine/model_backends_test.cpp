// The whole model on each backend of the op layer (kernels/backend_registry.h): every backend's
// logits on tiny agree with the ref backend's (the scalar twins, reductions in double), the engine's
// bit-exact invariants hold on ref too, and a backend lacking an op or a format the checkpoint needs
// is refused at load with both named.
#include "engine/model/model.h"
#include "kernels/backend_registry.h"
#include "tests/engine/test_paths.h"
#include "tests/engine/tiny_model.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

namespace hippo::engine {
namespace {

using testing::same_bits;
using testing::TempDir;
using testing::tokens;

TempDir& checkpoints() {
  static TempDir dir;
  return dir;
}

const std::string& tiny_quantised_dir() {
  static std::string path = testing::init_preset(checkpoints(), "tiny", true, 3, "quantised");
  return path;
}

std::unique_ptr<Model> load(const std::string& backend) {
  ModelOptions options;
  options.n_threads = 2;
  options.backend = backend;
  auto loaded = Model::load(tiny_quantised_dir(), options);
  INFO(loaded.status().to_string());
  REQUIRE(loaded.ok());
  return std::move(loaded.value());
}

TEST_CASE("every backend computes tiny's logits within tolerance of the ref backend", "[model][backend]") {
  const std::unique_ptr<Model> ref = load("ref");
  const auto ids = tokens(200, 1);
  SessionState ref_state = ref->new_session();
  std::vector<float> expected;
  REQUIRE(ref->forward(ref_state, ids, &expected).ok());
  const int64_t vocab = ref->text().vocab_size;
  for (const std::string& name : kernels::backend_names()) {
    if (name == "ref") continue;
    if (auto made = kernels::make_backend(name); !made.ok() && made.status().code() == ErrorCode::kUnavailable) {
      WARN("backend " << name << " NOT TESTED: " << made.status().to_string());  // gpu_device_check says so too
      continue;
    }
    INFO("backend " << name);
    const std::unique_ptr<Model> model = load(name);
    SessionState state = model->new_session();
    std::vector<float> logits;
    REQUIRE(model->forward(state, ids, &logits).ok());
    REQUIRE(logits.size() == expected.size());
    // Per position, the normalised squared error of the logits, and whether the best token agrees.
    std::vector<double> nmse;
    int64_t same_argmax = 0;
    for (size_t p = 0; p < ids.size(); ++p) {
      const float* a = &logits[p * static_cast<size_t>(vocab)];
      const float* b = &expected[p * static_cast<size_t>(vocab)];
      double err = 0, norm = 0;
      for (int64_t v = 0; v < vocab; ++v) {
        err += (double{a[v]} - b[v]) * (double{a[v]} - b[v]);
        norm += double{b[v]} * b[v];
      }
      nmse.push_back(err / norm);
      same_argmax += std::max_element(a, a + vocab) - a == std::max_element(b, b + vocab) - b ? 1 : 0;
    }
    std::vector<double> sorted = nmse;
    std::sort(sorted.begin(), sorted.end());
    INFO("NMSE median " << sorted[sorted.size() / 2] << ", worst " << sorted.back() << "; same best token at "
                         << same_argmax << " of " << ids.size());
    // Each op agrees with ref to rounding (backend_ops_test). Through the model, the QAT round trips
    // (FP8 window entries, FP4 compressed entries and index keys) turn a last-bit difference into a
    // whole quantisation step where a value sits on a rounding boundary, and a top-k can then pick
    // differently, so positions drift apart by more than rounding (seen: median 2e-7, worst 8e-3).
    // A wrong op gives an NMSE near 1 everywhere.
    CHECK(sorted[sorted.size() / 2] < 1e-5);
    CHECK(sorted.back() < 5e-2);
    CHECK(same_argmax >= static_cast<int64_t>(ids.size()) * 97 / 100);
  }
}

// Only the last row's logits (the head over one row keeps the ref backend quick).
std::vector<float> next_logits(Model& model, std::span<const int32_t> ids, std::span<const int64_t> splits) {
  SessionState state = model.new_session();
  size_t done = 0;
  for (int64_t split : splits) {
    REQUIRE(model.forward(state, ids.subspan(done, static_cast<size_t>(split) - done)).ok());
    done = static_cast<size_t>(split);
  }
  REQUIRE(model.forward(state, ids.subspan(done)).ok());
  return state.next_logits();
}

TEST_CASE("the engine's invariants hold bit for bit on the ref backend", "[model][backend]") {
  const std::unique_ptr<Model> ref = load("ref");
  const auto a = tokens(170, 2), b = tokens(150, 3);
  const std::vector<float> one_shot = next_logits(*ref, a, {});
  SECTION("chunked equals one-shot") {
    CHECK(same_bits(next_logits(*ref, a, std::vector<int64_t>{61, 130}), one_shot));
  }
  SECTION("a batch equals each session alone") {
    const std::vector<float> alone_b = next_logits(*ref, b, {});
    SessionState sa = ref->new_session(), sb = ref->new_session();
    REQUIRE(ref->forward(sa, std::span(a).first(100)).ok());
    REQUIRE(ref->forward(sb, std::span(b).first(90)).ok());
    ForwardRequest batch[2];
    batch[0].state = &sa;
    batch[0].tokens = std::span(a).subspan(100);
    batch[1].state = &sb;
    batch[1].tokens = std::span(b).subspan(90);
    REQUIRE(ref->forward(batch).ok());
    CHECK(same_bits(sa.next_logits(), one_shot));
    CHECK(same_bits(sb.next_logits(), alone_b));
  }
}

// The ref backend with some support taken away: what load must check before running anything. It
// also records the weights load hands to keep_weight, and counts the linear calls on a view that
// lies outside all of them (a device backend would copy such a view to the device on every call).
class Restricted final : public kernels::Backend {
 public:
  Restricted(std::optional<kernels::Op> op, std::optional<kernels::WeightFormat> format)
      : inner_(kernels::make_backend("ref").value()), op_(op), format_(format) {}

  const char* name() const override { return "restricted"; }
  int threads() const override { return 1; }
  bool supports(kernels::Op op) const override { return op != op_; }
  bool supports(kernels::WeightFormat format) const override { return format != format_; }
  bool supports(kernels::TableFormat format) const override { return inner_->supports(format); }

  Result<bool> keep_weight(const kernels::WeightView& w) override {
    const auto* begin = static_cast<const std::uint8_t*>(w.data);
    kept_.emplace_back(begin, begin + kernels::code_span_bytes(w));
    return false;
  }
  int64_t linear_calls_on_unkept_weights() const { return unkept_; }

  void linear(const float* x, int64_t m, const kernels::WeightView& w, float* y) override {
    count_if_unkept(w);
    inner_->linear(x, m, w, y);
  }
  void linear_rows(const float* x, int64_t m, const kernels::WeightView& w, float* const* y) override {
    count_if_unkept(w);
    inner_->linear_rows(x, m, w, y);
  }
  void rms_norm(const float* x, int64_t rows, int64_t n, const float* w, float eps, float* out) override {
    inner_->rms_norm(x, rows, n, w, eps, out);
  }
  void rope(float* x, int64_t rows, int64_t heads, int64_t dim, int64_t rope_dims, const float* c, const float* s,
            bool inverse) override {
    inner_->rope(x, rows, heads, dim, rope_dims, c, s, inverse);
  }
  void hc_mix(const kernels::HcMixArgs& a) override { inner_->hc_mix(a); }
  void hc_collapse(const float* s, const float* pre, int64_t rows, int64_t hc, int64_t d, float* out) override {
    inner_->hc_collapse(s, pre, rows, hc, d, out);
  }
  void hc_expand(float* s, const float* sub, const float* post, const float* comb, int64_t rows, int64_t hc,
                 int64_t d) override {
    inner_->hc_expand(s, sub, post, comb, rows, hc, d);
  }
  void attention(const kernels::AttentionArgs& a) override { inner_->attention(a); }
  void kv_encode(kernels::KvFormat f, const float* x, int64_t rows, int64_t dim, std::uint8_t* e) override {
    inner_->kv_encode(f, x, rows, dim, e);
  }
  void kv_decode(kernels::KvFormat f, const std::uint8_t* e, int64_t rows, int64_t dim, float* x) override {
    inner_->kv_decode(f, e, rows, dim, x);
  }
  void fp4_round_trip(float* x, int64_t rows, int64_t dim) override { inner_->fp4_round_trip(x, rows, dim); }
  void compressor_pool(const float* kv, const float* g, int64_t groups, int64_t ratio, int64_t dim, float* l) override {
    inner_->compressor_pool(kv, g, groups, ratio, dim, l);
  }
  void indexer(const kernels::IndexerArgs& a) override { inner_->indexer(a); }
  void router(const kernels::RouterArgs& a) override { inner_->router(a); }
  void swiglu(float* g, const float* u, int64_t rows, int64_t width, float limit, const float* w) override {
    inner_->swiglu(g, u, rows, width, limit, w);
  }
  void add_rows(const float* y, int64_t m, int64_t d, const int64_t* dst, float* out) override {
    inner_->add_rows(y, m, d, dst, out);
  }
  void gather_rows(const kernels::RowTable& t, const int64_t* ids, int64_t n, float* out) override {
    inner_->gather_rows(t, ids, n, out);
  }
  void engram_fuse(float* s, const float* kv, const float* w, int64_t rows, int64_t hc, int64_t d, float eps) override {
    inner_->engram_fuse(s, kv, w, rows, hc, d, eps);
  }

 private:
  void count_if_unkept(const kernels::WeightView& w) {
    const auto* begin = static_cast<const std::uint8_t*>(w.data);
    const bool kept = std::any_of(kept_.begin(), kept_.end(), [&](const auto& range) {
      return begin >= range.first && begin + kernels::code_span_bytes(w) <= range.second;
    });
    if (!kept) ++unkept_;
  }

  std::unique_ptr<kernels::Backend> inner_;
  std::optional<kernels::Op> op_;
  std::optional<kernels::WeightFormat> format_;
  std::vector<std::pair<const std::uint8_t*, const std::uint8_t*>> kept_;
  int64_t unkept_ = 0;
};

// A device backend uploads what keep_weight hands it and reads its copies from then on: every
// matrix the forward pass multiplies by, slices of them included, must have been handed over.
TEST_CASE("load hands the backend every matrix the forward pass multiplies by", "[model][backend]") {
  auto backend = std::make_unique<Restricted>(std::nullopt, std::nullopt);
  Restricted& recording = *backend;
  auto loaded = Model::load(tiny_quantised_dir(), std::move(backend));
  REQUIRE(loaded.ok());
  SessionState state = (*loaded)->new_session();
  const auto ids = tokens(150, 4);  // past the window and the compression groups, with Engram and experts
  REQUIRE((*loaded)->forward(state, ids).ok());
  REQUIRE((*loaded)->forward(state, std::span(ids).first(1)).ok());  // a decode step
  CHECK(recording.linear_calls_on_unkept_weights() == 0);
}

TEST_CASE("a backend lacking an op or a weight format the checkpoint needs is refused at load, naming both",
          "[model][backend]") {
  auto refused = [](std::optional<kernels::Op> op, std::optional<kernels::WeightFormat> format) {
    auto loaded = Model::load(tiny_quantised_dir(), std::make_unique<Restricted>(op, format));
    REQUIRE_FALSE(loaded.ok());
    return loaded.status().to_string();
  };
  const std::string no_fp4 = refused(std::nullopt, kernels::WeightFormat::kFp4Row32);
  CHECK_THAT(no_fp4, Catch::Contains("backend 'restricted'") && Catch::Contains("fp4") && Catch::Contains("experts"));
  const std::string no_router = refused(kernels::Op::kRouter, std::nullopt);
  CHECK_THAT(no_router, Catch::Contains("backend 'restricted'") && Catch::Contains("'router'"));
  // A format the checkpoint never uses is no reason to refuse it.
  const std::string plain = testing::init_preset(checkpoints(), "tiny", false, 3, "plain");  // BF16 and F32 only
  auto loaded = Model::load(plain, std::make_unique<Restricted>(std::nullopt, kernels::WeightFormat::kFp4Row32));
  INFO(loaded.status().to_string());
  CHECK(loaded.ok());
  CHECK_THAT(kernels::make_backend("tpu").status().to_string(), Catch::Contains("unknown backend 'tpu'") && Catch::Contains("cpu, ref"));
}

}  // namespace
}  // namespace hippo::engine
