// config.json parsing, printing and validation, against the released DeepSeek-V4.1-Flash config.
#include "engine/config/engram_primes.h"
#include "engine/config/layer_schedule.h"
#include "engine/config/model_config.h"
#include "engine/config/presets.h"
#include "tests/engine/test_paths.h"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <catch2/catch.hpp>

#include <set>

using namespace hippo::engine;
using hippo::engine::testing::read_file;
using hippo::engine::testing::test_data;

namespace {

const std::string kOfficial = test_data("deepseek-v41-flash.config.json");

// The official config with one edit applied to its JSON; returns the parse error message ("" if ok).
std::string parse_error_after(const std::function<void(boost::json::object&)>& edit) {
  boost::json::value root = boost::json::parse(read_file(kOfficial));
  edit(root.as_object());
  auto config = parse_model_config(boost::json::serialize(root), "config.json");
  return config.ok() ? "" : config.status().message();
}

boost::json::object& text(boost::json::object& root) { return root["text_config"].as_object(); }

}  // namespace

TEST_CASE("the released DeepSeek-V4.1-Flash config parses with its values", "[config]") {
  auto config = load_model_config(kOfficial);
  REQUIRE(config.ok());
  const TextConfig& t = config->text_config;
  CHECK(config->model_type == "deepseek_v41");
  CHECK(config->quantised());
  CHECK(config->quantization_config->weight_block_size == std::vector<int64_t>{32, 32});
  CHECK(t.hidden_size == 5120);
  CHECK(t.num_hidden_layers == 40);
  CHECK(t.compress_ratios.size() == 43);
  CHECK(t.kv_source_layer_ids == std::vector<int64_t>{2, 8, 14, 20});
  CHECK(t.rms_norm_eps == 1e-20);
  CHECK(t.rope_scaling.factor == 16);
  CHECK_FALSE(t.gate_temp.has_value());  // not in the release file
  CHECK(t.engram_num_embeddings == std::vector<int64_t>{384006168, 384016682});
  CHECK(config->vision_config.hidden_size == 1024);
  CHECK_FALSE(config->vision_config.max_wh_ratio.has_value());  // null
}

TEST_CASE("printing and parsing again gives the same config", "[config]") {
  for (const std::string& name : {std::string("official"), std::string("tiny"), std::string("small-fullkv")}) {
    INFO(name);
    ModelConfig config = name == "official" ? load_model_config(kOfficial).value() : preset_config(name, true).value();
    const std::string text = model_config_to_text(config);
    auto again = parse_model_config(text, "printed");
    REQUIRE(again.ok());
    CHECK(model_config_to_text(*again) == text);
    CHECK(again->text_config.rms_norm_eps == config.text_config.rms_norm_eps);
    CHECK(again->text_config.compress_ratios == config.text_config.compress_ratios);
  }
  // Float fields keep a decimal point, so that transformers' strict config classes accept the file
  // (docs/reference-model.md, D14); integer fields stay integers.
  const std::string tiny = model_config_to_text(preset_config("tiny", true).value());
  for (const char* field : {"\"swiglu_limit\": 10.0,", "\"gate_temp\": 1.0,", "\"rope_theta\": 10000.0,",
                            "\"factor\": 16.0,", "\"beta_slow\": 1.0,", "\"compress_rope_theta\": 160000.0,",
                            "\"routed_scaling_factor\": 1.5,", "\"rms_norm_eps\": 1e-20,", "\"hc_eps\": 1e-06,",
                            "\"hidden_size\": 32,", "\"original_max_position_embeddings\": 65536"}) {
    INFO(field);
    CHECK(tiny.find(field) != std::string::npos);
  }
  // A plain preset prints no quantization_config and parses back as plain.
  auto plain = parse_model_config(model_config_to_text(preset_config("tiny", false).value()), "plain");
  REQUIRE(plain.ok());
  CHECK_FALSE(plain->quantised());
}

TEST_CASE("another model type is a clear error", "[config]") {
  CHECK_THAT(parse_error_after([](auto& root) { root["model_type"] = "deepseek_v4"; }),
             Catch::Contains("model_type 'deepseek_v4' is not supported; hippo runs 'deepseek_v41'"));
  CHECK_THAT(parse_error_after([](auto& root) { text(root)["model_type"] = "llama"; }),
             Catch::Contains("text_config.model_type: 'llama'"));
}

TEST_CASE("a missing or ill-typed field is an error naming it", "[config]") {
  CHECK(parse_error_after([](auto& root) { text(root).erase("hidden_size"); }) ==
        "config.json: text_config.hidden_size: missing");
  CHECK(parse_error_after([](auto& root) { text(root)["hidden_size"] = "5120"; }) ==
        "config.json: text_config.hidden_size: expected an integer, got \"5120\"");
  CHECK(parse_error_after([](auto& root) { text(root)["compress_ratios"].as_array()[5] = 2.5; }) ==
        "config.json: text_config.compress_ratios[5]: expected an integer, got 2.5E0");
  CHECK(parse_error_after([](auto& root) { text(root)["rope_scaling"].as_object().erase("beta_fast"); }) ==
        "config.json: text_config.rope_scaling.beta_fast: missing");
  CHECK(parse_error_after([](auto& root) { root.erase("vision_config"); }) == "config.json: vision_config: missing");
  CHECK(parse_error_after([](auto& root) { root["quantization_config"].as_object()["weight_block_size"] = 32; }) ==
        "config.json: quantization_config.weight_block_size: expected an array, got 32");
  CHECK_THAT(parse_error_after([](auto&) {}), Catch::Equals(""));
  auto garbage = parse_model_config("{\"model_type\": ", "x.json");
  REQUIRE_FALSE(garbage.ok());
  CHECK_THAT(garbage.status().message(), Catch::StartsWith("x.json: not valid JSON"));
}

TEST_CASE("inconsistent values are errors naming the field", "[config]") {
  CHECK_THAT(parse_error_after([](auto& root) { text(root)["compress_ratios"].as_array().pop_back(); }),
             Catch::Contains("text_config.compress_ratios: 42 entries, expected num_hidden_layers + "
                             "num_nextn_predict_layers = 43"));
  CHECK_THAT(parse_error_after([](auto& root) { text(root)["kv_source_layer_ids"] = boost::json::array{1, 8, 14, 20}; }),
             Catch::Contains("text_config.kv_source_layer_ids: layer 1 has compress ratio 0"));
  CHECK_THAT(parse_error_after([](auto& root) { text(root)["kv_source_layer_ids"] = boost::json::array{8, 14, 20}; }),
             Catch::Contains("layer 2 compresses (ratio 2) but no KV source is at or below it"));
  CHECK_THAT(parse_error_after([](auto& root) { text(root)["candidate_source_layer_id"] = 14; }),
             Catch::Contains("text_config.candidate_source_layer_id: 14 must be the last KV source (20)"));
  CHECK_THAT(parse_error_after([](auto& root) {
               text(root)["index_source_layer_ids"] = boost::json::array{2, 14, 20};
             }),
             Catch::Contains("KV source layer 8 must also be an index source"));
  CHECK_THAT(parse_error_after([](auto& root) { text(root)["engram_num_embeddings"].as_array()[1] = 384016683; }),
             Catch::Contains("text_config.engram_num_embeddings[1]: 384016683 rows, but the prime-sized tables for "
                             "engram_vocab_size 16000000 sum to 384016682"));
  CHECK_THAT(parse_error_after([](auto& root) { text(root)["num_experts_per_tok"] = 400; }),
             Catch::Contains("text_config.num_experts_per_tok: must not exceed n_routed_experts"));
  CHECK_THAT(parse_error_after([](auto& root) { text(root)["head_dim"] = 500; }),
             Catch::Contains("text_config.head_dim: must be a multiple of 32"));
  CHECK_THAT(parse_error_after([](auto& root) { root["bos_token_id"] = 200000; }),
             Catch::Contains("bos_token_id: 200000 is not a token id below vocab_size 129280"));
}

TEST_CASE("Engram table primes reproduce the released table sizes", "[config]") {
  auto primes = engram_table_primes(16000000, 2, 4, 8);
  REQUIRE(primes.size() == 2);
  REQUIRE(primes[0].size() == 24);
  CHECK(primes[0][0] == 16000057);  // the first prime >= 16,000,000
  int64_t rows0 = 0, rows1 = 0;
  for (int64_t p : primes[0]) rows0 += p;
  for (int64_t p : primes[1]) rows1 += p;
  CHECK(rows0 == 384006168);
  CHECK(rows1 == 384016682);
  CHECK(primes[1][0] > primes[0][23]);  // never reused
  CHECK(is_prime(2));
  CHECK_FALSE(is_prime(1));
  CHECK_FALSE(is_prime(16000000));
}

TEST_CASE("the layer schedule of the release", "[config]") {
  auto config = load_model_config(kOfficial);
  REQUIRE(config.ok());
  auto roles = layer_schedule(config->text_config);
  REQUIRE(roles.size() == 40);
  CHECK(roles[0].compress_ratio == 0);
  CHECK(roles[0].kv_source == -1);
  CHECK(roles[1].engram);
  CHECK(roles[2].writes_kv);
  CHECK(roles[2].owns_index_query);
  CHECK(roles[7].kv_source == 2);
  CHECK(roles[7].index_source == 2);
  CHECK(roles[14].writes_kv);
  CHECK(roles[14].engram);
  CHECK(roles[20].candidate_source);
  CHECK(roles[20].compress_ratio == 1);
  CHECK(roles[24].reindex);
  CHECK(roles[24].kv_source == 20);
  CHECK(roles[26].index_source == 24);
  CHECK(roles[39].index_source == 36);
  CHECK(describe_role(roles[25]) == "reuse kv 20, top-k 24");
}

TEST_CASE("the tiny preset keeps every structural feature of the release", "[config]") {
  auto config = preset_config("tiny", true);
  REQUIRE(config.ok());
  const TextConfig& t = config->text_config;
  auto roles = layer_schedule(t);
  int window_only = 0, ratio2_writers = 0, reusing = 0, reindex = 0, engram = 0;
  for (const LayerRole& r : roles) {
    window_only += r.compress_ratio == 0;
    ratio2_writers += r.writes_kv && r.compress_ratio == 2;
    reusing += r.compress_ratio > 0 && !r.writes_kv;
    reindex += r.reindex;
    engram += r.engram;
  }
  CHECK(window_only >= 2);
  CHECK(ratio2_writers >= 2);
  CHECK(roles[static_cast<size_t>(t.candidate_source_layer_id)].compress_ratio == 1);
  CHECK(reindex >= 2);
  CHECK(reusing >= 4);
  CHECK(roles[3].kv_source == 2);  // a reusing layer between the two ratio-2 writers
  CHECK(engram == 2);
  CHECK(t.num_experts_per_tok < t.n_routed_experts);
  CHECK(t.n_shared_experts == 1);
  CHECK(t.num_nextn_predict_layers == 3);
  CHECK(preset_config("huge", true).status().message() == "unknown preset 'huge' (known: tiny, small-fullkv, wide, demo)");
}

TEST_CASE("the wide preset has the release's attention, indexer, compressor and expert shapes", "[config]") {
  auto wide = preset_config("wide", true);
  REQUIRE(wide.ok());
  auto release = load_model_config(kOfficial);
  REQUIRE(release.ok());
  const TextConfig& w = wide->text_config;
  const TextConfig& r = release->text_config;
  for (auto field : {&TextConfig::hidden_size, &TextConfig::moe_intermediate_size, &TextConfig::num_attention_heads,
                     &TextConfig::head_dim, &TextConfig::qk_rope_head_dim, &TextConfig::q_lora_rank,
                     &TextConfig::o_lora_rank, &TextConfig::o_groups, &TextConfig::index_n_heads,
                     &TextConfig::index_head_dim, &TextConfig::index_topk, &TextConfig::candidate_topk_blocks,
                     &TextConfig::candidate_block_size, &TextConfig::sliding_window})
    CHECK(w.*field == r.*field);
  std::set<int64_t> ratios(w.compress_ratios.begin(), w.compress_ratios.end());
  CHECK(ratios == std::set<int64_t>{0, 1, 2});
  CHECK(w.n_routed_experts < r.n_routed_experts);
  CHECK(w.num_hidden_layers == 4);
}
