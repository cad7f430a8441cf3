// Parameter counts and KV bytes per token: the released config must give the published numbers
// (552B backbone, 196.6B Engram, 890 B/token), and the presets the KV sizes they promise.
#include "engine/config/presets.h"
#include "engine/model/model_summary.h"
#include "engine/weights/tensor_table.h"
#include "tests/engine/test_paths.h"

#include <catch2/catch.hpp>

using namespace hippo::engine;
using hippo::engine::testing::test_data;

TEST_CASE("the released config has 552B backbone, 196.6B Engram and 890 B/token", "[summary]") {
  auto config = load_model_config(test_data("deepseek-v41-flash.config.json"));
  REQUIRE(config.ok());
  const TensorTable table = TensorTable::build(*config);
  const ParameterCounts p = count_parameters(*config, table);

  CHECK(p.engram == (384006168LL + 384016682LL) * 256);  // 196,613,849,600
  CHECK(p.backbone == Approx(552e9).epsilon(0.005));
  CHECK(p.total == Approx(763e9).epsilon(0.005));      // HF hub: 763B
  CHECK(p.dspark == Approx(14.2e9).epsilon(0.01));      // spec §1.3: about 14.2B
  CHECK(p.vision == Approx(0.5e9).epsilon(0.05));
  CHECK(p.total == p.backbone + p.engram + p.dspark + p.vision);
  CHECK(p.active_decode == Approx(16e9).epsilon(0.02));   // "16 B while generating"
  CHECK(p.active_prefill == Approx(8e9).epsilon(0.02));   // "8 B while reading"

  // Per layer (§1.3): 384 routed experts x 3 x 5120 x 2304.
  CHECK(p.by_component.at("routed_experts") == 40LL * 384 * 3 * 5120 * 2304);
  CHECK(p.by_component.at("embedding") == 129280LL * 5120);

  const KvFootprint kv = kv_footprint(config->text_config);
  CHECK(kv.bytes_per_token == 890.0);
  CHECK(kv.main_entry_bytes == 288);
  CHECK(kv.index_entry_bytes == 68);
  CHECK(kv.window_bytes_per_layer == 128 * 528);
  CHECK(kv.window_bytes == 43 * 128 * 528);

  // The quantised release is about 475 GiB on disk in 48 shards (spec §1.3): the table's dtypes and
  // shapes add up to that.
  CHECK(static_cast<double>(table.total_bytes()) / (1 << 30) == Approx(475.5).epsilon(0.005));
}

TEST_CASE("the release tensor table has the names and shapes of the spec", "[summary]") {
  auto config = load_model_config(test_data("deepseek-v41-flash.config.json"));
  REQUIRE(config.ok());
  const TensorTable table = TensorTable::build(*config);
  auto shape = [&](const char* name) {
    const TensorSpec* spec = table.find(name);
    INFO(name);
    REQUIRE(spec != nullptr);
    return spec->shape;
  };
  using S = std::vector<int64_t>;
  CHECK(shape("embed.weight") == S{129280, 5120});
  CHECK(shape("layers.0.attn.wq_a.weight") == S{1280, 5120});
  CHECK(shape("layers.0.attn.wq_a.scale") == S{40, 160});
  CHECK(shape("layers.0.attn.wq_b.scale") == S{1024, 40});
  CHECK(shape("layers.0.attn.wo_a.weight") == S{8192, 4096});
  CHECK(shape("layers.0.attn.wo_a.scale") == S{256, 128});
  CHECK(shape("layers.0.attn.wo_b.scale") == S{160, 256});
  CHECK(shape("layers.0.hc_attn_fn") == S{24, 20480});
  CHECK(shape("layers.20.attn.compressor.wkv.weight") == S{512, 5120});
  CHECK(table.find("layers.20.attn.compressor.wgate.weight") == nullptr);  // ratio 1: no gate
  CHECK(shape("layers.14.attn.compressor.wgate.weight") == S{512, 5120});
  CHECK(table.find("layers.3.attn.compressor.wkv.weight") == nullptr);     // reuses layer 2's KV
  CHECK(shape("layers.8.attn.indexer.wk.weight") == S{128, 512});
  CHECK(shape("layers.24.attn.indexer.wq_b.weight") == S{4096, 1280});
  CHECK(shape("layers.24.attn.indexer.wq_b.scale") == S{128, 40});
  CHECK(table.find("layers.24.attn.indexer.wk.weight") == nullptr);        // reindex: no keys of its own
  CHECK(shape("layers.39.ffn.gate.bias_vl") == S{384});
  CHECK(shape("layers.0.ffn.experts.383.w1.weight") == S{2304, 2560});
  CHECK(shape("layers.0.ffn.experts.0.w1.scale") == S{2304, 160});
  CHECK(shape("layers.0.ffn.experts.0.w2.weight") == S{5120, 1152});
  CHECK(shape("layers.0.ffn.experts.0.w2.scale") == S{5120, 72});
  CHECK(shape("layers.1.engram.embed.weight") == S{384006168, 256});
  CHECK(shape("layers.14.engram.embed.scale") == S{384016682, 8});
  CHECK(shape("layers.1.engram.wkv.weight") == S{25600, 6144});
  CHECK(shape("layers.1.engram.wkv.scale") == S{800, 192});
  CHECK(shape("layers.14.engram.q_weight") == S{4, 5120});
  CHECK(shape("mtp.0.main_proj.weight") == S{5120, 15360});
  CHECK(shape("mtp.1.ffn.experts.127.w3.weight") == S{2304, 2560});
  CHECK(shape("mtp.2.markov_head.embed.weight") == S{129280, 256});
  CHECK(shape("mtp.2.markov_head.head.weight") == S{129280, 256});
  CHECK(shape("mtp.2.confidence_head.proj.weight") == S{1, 5376});
  CHECK(table.find("mtp.2.hc_head_fn") == nullptr);  // V4.1: the draft has no hc_head
  CHECK(shape("vision.blocks.31.mlp.w1.weight") == S{5632, 1024});
  CHECK(shape("vision.patch_embed.proj.weight") == S{1024, 588});
  CHECK(shape("aligner.w1.weight") == S{5120, 9216});
  CHECK(shape("image_newline") == S{5120});
  CHECK(table.find("hc_head_fn") == nullptr);  // V4.1: no top-level hc_head
  CHECK(table.find("layers.0.ffn.gate.tid2eid") == nullptr);
  // The FP4 expert bytes of §4.3: 18,800,640 per expert.
  int64_t expert_bytes = 0;
  for (const char* name : {"w1", "w2", "w3"})
    for (const char* part : {"weight", "scale"})
      expert_bytes += table.find(std::string("layers.0.ffn.experts.0.") + name + "." + part)->n_bytes();
  CHECK(expert_bytes == 18800640);
}

TEST_CASE("the presets' KV bytes per token", "[summary]") {
  auto full = preset_config("small-fullkv", true);
  REQUIRE(full.ok());
  CHECK(kv_footprint(full->text_config).bytes_per_token == 890.0);
  auto tiny = preset_config("tiny", true);
  REQUIRE(tiny.ok());
  // Writers 2, 4 (ratio 2) and 7 (ratio 1); entries (64/2 + 64/16) + (32/2 + 32/32) = 36 + 17 = 53 B.
  CHECK(kv_footprint(tiny->text_config).bytes_per_token == 53.0 / 2 * 2 + 53.0);
  const ParameterCounts p = count_parameters(*tiny, TensorTable::build(*tiny));
  CHECK(p.active_decode < p.backbone);
  CHECK(p.active_prefill < p.active_decode);
}

// A tied head (stored once, as embed.weight) has no parameters of its own, and a generated token still
// reads the whole of it.
TEST_CASE("a tied head counts once and is still read per token", "[summary]") {
  auto untied = preset_config("demo", true);
  REQUIRE(untied.ok());
  ModelConfig tied = *untied;
  tied.tie_word_embeddings = tied.text_config.tie_word_embeddings = true;
  REQUIRE(validate_model_config(tied).ok());
  const TensorTable tied_table = TensorTable::build(tied);
  const TensorTable untied_table = TensorTable::build(*untied);
  CHECK(tied_table.find("head.weight") == nullptr);
  CHECK(head_weight_prefix(tied.text_config) == "embed");
  const ParameterCounts a = count_parameters(*untied, untied_table);
  const ParameterCounts b = count_parameters(tied, tied_table);
  const int64_t head = untied->text_config.vocab_size * untied->text_config.hidden_size;
  CHECK(b.total == a.total - head);
  CHECK(b.by_component.count("head") == 0);
  CHECK(b.active_decode == a.active_decode);
  CHECK(b.active_decode_bytes == a.active_decode_bytes);
  CHECK(b.active_prefill == a.active_prefill);
}
