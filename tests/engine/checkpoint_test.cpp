// `model init` checkpoints: they load and pass validation in both presets and layouts, the bytes are a
// fixed function of the seed, the plain layout holds exactly the dequantised quantised values, a tied
// head is stored once, and every kind of bad checkpoint is an error naming the tensor and the shard.
#include "kernels/ref/numeric_formats.h"
#include "engine/model/model.h"
#include "engine/weights/checkpoint.h"
#include "engine/weights/checkpoint_fingerprint.h"
#include "engine/weights/dequant.h"
#include "engine/weights/float_tensor.h"
#include "engine/weights/init_checkpoint.h"
#include "engine/weights/random_init.h"
#include "engine/weights/safetensors_writer.h"
#include "tests/engine/test_paths.h"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>

#include <unistd.h>

using namespace hippo::engine;
using hippo::engine::testing::init_preset;
using hippo::engine::testing::read_file;
using hippo::engine::testing::TempDir;
using hippo::engine::testing::write_file;
namespace fs = std::filesystem;

namespace {

// FNV-1a of "name:fnv1a(contents)" lines for every file but the tokenizer's, in name order.
std::string checkpoint_digest(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  std::string lines;
  for (const std::string& name : names)
    if (name.rfind("tokenizer", 0) != 0) lines += fmt::format("{}:{:016x}\n", name, fnv1a64(read_file(dir + "/" + name)));
  return fmt::format("{:016x}", fnv1a64(lines));
}

// Rewrites every shard through `edit` and regenerates the index from what the shards then hold.
void rewrite_shards(const std::string& dir, const std::function<void(const std::string&, std::vector<ShardTensor>&)>& edit) {
  std::map<std::string, std::string> weight_map;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (entry.path().extension() != ".safetensors") continue;
    std::vector<ShardTensor> tensors;
    {
      auto shard = SafetensorsFile::open(entry.path().string());
      REQUIRE(shard.ok());
      for (const SafetensorsEntry& e : shard->entries()) {
        auto data = shard->data(e);
        tensors.push_back({e.name, e.dtype, e.shape, std::vector<std::byte>(data.begin(), data.end())});
      }
    }
    edit(name, tensors);
    for (const ShardTensor& t : tensors) weight_map[t.name] = name;
    REQUIRE(write_safetensors(entry.path().string(), std::move(tensors)).ok());
  }
  boost::json::object map;
  for (const auto& [tensor, shard] : weight_map) map[tensor] = shard;
  write_file(dir + "/" + std::string(kIndexFile), boost::json::serialize(boost::json::object{{"weight_map", map}}));
}

std::string load_error(const std::string& dir) {
  auto checkpoint = load_checkpoint(dir);
  return checkpoint.ok() ? "" : checkpoint.status().message();
}

// The shard the index places a tensor in.
std::string shard_of(const std::string& dir, const std::string& tensor) {
  boost::json::value index = boost::json::parse(read_file(dir + "/" + std::string(kIndexFile)));
  return std::string(index.at("weight_map").at(tensor).as_string());
}

std::vector<float> floats_of(const TensorView& view) {
  const int64_t n = element_count(view.spec->shape);
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    uint16_t bits;
    std::memcpy(&bits, view.bytes.data() + 2 * i, 2);
    out[static_cast<size_t>(i)] = hippo::kernels::ref::bf16_to_f32(bits);
  }
  return out;
}

std::span<const uint8_t> u8(const TensorView& view) {
  return {reinterpret_cast<const uint8_t*>(view.bytes.data()), view.bytes.size()};
}

}  // namespace

TEST_CASE("model init checkpoints load and validate, both presets and layouts", "[checkpoint]") {
  TempDir dir;
  for (const char* preset : {"tiny", "small-fullkv"}) {
    for (bool quantised : {false, true}) {
      INFO(preset << (quantised ? " quantised" : " plain"));
      const std::string path = init_preset(dir, preset, quantised, 7, fmt::format("{}-{}", preset, quantised));
      auto checkpoint = load_checkpoint(path);
      INFO(checkpoint.status().to_string());
      REQUIRE(checkpoint.ok());
      CHECK(checkpoint->config().quantised() == quantised);
      CHECK(checkpoint->n_shards() > 1);  // sharded like the release, read through the index
      CHECK(checkpoint->mapped_bytes() > static_cast<uint64_t>(checkpoint->table().total_bytes()));
      CHECK(checkpoint->resident_bytes() <= checkpoint->mapped_bytes() + 4096 * checkpoint->n_shards());
      const TensorView wq_a = checkpoint->tensor("layers.3.attn.wq_a.weight");
      CHECK(wq_a.spec->dtype == (quantised ? DType::kF8E4M3 : DType::kBF16));
      CHECK(wq_a.bytes.size() == static_cast<size_t>(wq_a.spec->n_bytes()));
      CHECK(fs::exists(path + "/tokenizer.json"));
      CHECK(read_file(path + "/config.json") == model_config_to_text(checkpoint->config()));
    }
  }
}

// Pages of this process in RAM (Linux /proc/self/statm, second field), in bytes.
uint64_t resident_set_bytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

TEST_CASE("loading maps the shards and reads only their headers", "[checkpoint]") {
  TempDir dir;
  const std::string path = init_preset(dir, "small-fullkv", false, 1);
  const uint64_t before = resident_set_bytes();
  auto checkpoint = load_checkpoint(path);
  REQUIRE(checkpoint.ok());
  const uint64_t after = resident_set_bytes();
  // 73 MB of weights are mapped; validation touches the headers and builds the table (a few MB).
  CHECK(checkpoint->mapped_bytes() > 70'000'000);
  CHECK(after < before + checkpoint->mapped_bytes() / 4);
  // Reading a tensor touches its pages in place: they become part of this process, not a copy.
  const TensorView head = checkpoint->tensor("head.weight");
  uint64_t sum = 0;
  for (std::byte b : head.bytes) sum += static_cast<uint64_t>(b);
  CHECK(sum > 0);
  CHECK(resident_set_bytes() >= after + head.bytes.size() / 2);
}

// A backend that keeps its own copy of a weight's codes (the CPU backend's FP4 in lane order) lets
// load drop the mapping's pages of them: out of this process's memory, still readable from the file.
TEST_CASE("dropped pages leave the process and read back the same bytes", "[checkpoint]") {
  TempDir dir;
  const std::string path = init_preset(dir, "small-fullkv", false, 1);
  auto checkpoint = load_checkpoint(path);
  REQUIRE(checkpoint.ok());
  const TensorView head = checkpoint->tensor("head.weight");
  auto sum = [&] {
    uint64_t total = 0;
    for (std::byte b : head.bytes) total += static_cast<uint64_t>(b);
    return total;
  };
  const uint64_t first = sum();
  const uint64_t touched = resident_set_bytes();
  checkpoint->drop_pages(head.bytes.data(), head.bytes.size());
  CHECK(resident_set_bytes() + head.bytes.size() / 2 <= touched);
  CHECK(sum() == first);
  CHECK(resident_set_bytes() >= touched - head.bytes.size() / 4);
  const std::byte outside[8] = {};
  checkpoint->drop_pages(outside, sizeof outside);  // not in any shard: nothing happens
}

TEST_CASE("the tiny checkpoint is a fixed function of the seed", "[checkpoint]") {
  TempDir dir;
  const std::string a = init_preset(dir, "tiny", true, 1, "a");
  const std::string b = init_preset(dir, "tiny", true, 1, "b");
  const std::string c = init_preset(dir, "tiny", true, 2, "c");
  const std::string plain = init_preset(dir, "tiny", false, 1, "plain");
  CHECK(checkpoint_digest(a) == checkpoint_digest(b));
  CHECK(checkpoint_digest(a) != checkpoint_digest(c));
  // Committed digests: a change in the layout, the generator or the file format on any machine
  // changes them. Update them only together with docs/model-checkpoint.md.
  CHECK(checkpoint_digest(a) == "b21f4d8743fbeb6c");
  CHECK(checkpoint_digest(plain) == "3d741b3a7d444382");
}

TEST_CASE("a plain checkpoint holds exactly the dequantised values of the quantised one", "[checkpoint]") {
  TempDir dir;
  auto plain = load_checkpoint(init_preset(dir, "tiny", false, 3, "plain"));
  auto quantised = load_checkpoint(init_preset(dir, "tiny", true, 3, "quantised"));
  REQUIRE(plain.ok());
  REQUIRE(quantised.ok());
  int fp8 = 0, fp4 = 0, values = 0;
  for (const TensorSpec& spec : plain->table().tensors()) {
    INFO(spec.name);
    const TensorView p = plain->tensor(spec.name);
    if (spec.init.kind == InitRule::Kind::kUniform) {
      const TensorView q = quantised->tensor(spec.name);
      CHECK(std::equal(p.bytes.begin(), p.bytes.end(), q.bytes.begin(), q.bytes.end()));
      ++values;
      continue;
    }
    const std::string scale = spec.name.substr(0, spec.name.size() - std::string(".weight").size()) + ".scale";
    const TensorView codes = quantised->tensor(spec.name);
    const TensorView scales = quantised->tensor(scale);
    const int64_t rows = spec.shape[0], cols = spec.shape[1];
    std::vector<float> expected(static_cast<size_t>(rows * cols));
    if (spec.init.kind == InitRule::Kind::kFp8) {
      dequantize_fp8(u8(codes), u8(scales), rows, cols, spec.block[0], spec.block[1], expected);
      ++fp8;
    } else {
      dequantize_fp4(u8(codes), u8(scales), rows, cols, expected);
      ++fp4;
    }
    CHECK(floats_of(p) == expected);
  }
  CHECK(fp8 > 0);
  CHECK(fp4 > 0);
  CHECK(values > 0);
  // tensor_to_float reads either layout to the same floats.
  for (const TensorSpec& spec : plain->table().tensors()) {
    INFO(spec.name);
    const std::vector<float> from_plain = tensor_to_float(*plain, spec.name);
    CHECK(static_cast<int64_t>(from_plain.size()) == element_count(spec.logical_shape));
    CHECK(from_plain == tensor_to_float(*quantised, spec.name));
  }
  // The quantised Engram table has one scale per 32 values of a row.
  CHECK(quantised->tensor("layers.1.engram.embed.scale").spec->shape == std::vector<int64_t>{6126, 1});
}

TEST_CASE("bad checkpoints are errors naming the tensor and the shard", "[checkpoint]") {
  TempDir dir;
  SECTION("a missing tensor") {
    const std::string path = init_preset(dir, "tiny", true, 1);
    rewrite_shards(path, [](const std::string&, std::vector<ShardTensor>& tensors) {
      std::erase_if(tensors, [](const ShardTensor& t) { return t.name == "layers.5.ffn.experts.3.w2.scale"; });
    });
    CHECK_THAT(load_error(path), Catch::Contains("tensor layers.5.ffn.experts.3.w2.scale (F8_E8M0 [32, 1]) is missing; "
                                                 "the checkpoint does not match its config.json"));
  }
  SECTION("an extra tensor") {
    const std::string path = init_preset(dir, "tiny", true, 1);
    const std::string shard = shard_of(path, "layers.3.attn.wq_a.weight");
    rewrite_shards(path, [&](const std::string& name, std::vector<ShardTensor>& tensors) {
      if (name == shard) tensors.push_back({"layers.3.attn.compressor.wkv.weight", DType::kBF16, {1}, {std::byte{0}, std::byte{0}}});
    });
    CHECK_THAT(load_error(path), Catch::Contains(shard + ": tensor layers.3.attn.compressor.wkv.weight is not part of "
                                                 "the layout config.json describes"));
  }
  SECTION("a mis-shaped tensor") {
    const std::string path = init_preset(dir, "tiny", true, 1);
    rewrite_shards(path, [](const std::string&, std::vector<ShardTensor>& tensors) {
      for (ShardTensor& t : tensors)
        if (t.name == "layers.3.attn.wq_a.weight") t.shape = {16, 64};
    });
    CHECK_THAT(load_error(path),
               Catch::Contains(shard_of(path, "layers.3.attn.wq_a.weight") + ": tensor layers.3.attn.wq_a.weight: shape [16, 64], expected [32, 32]"));
  }
  SECTION("a wrong dtype") {
    const std::string path = init_preset(dir, "tiny", true, 1);
    rewrite_shards(path, [](const std::string&, std::vector<ShardTensor>& tensors) {
      for (ShardTensor& t : tensors)
        if (t.name == "layers.2.attn.attn_sink") t.dtype = DType::kI32;
    });
    CHECK_THAT(load_error(path), Catch::Contains(shard_of(path, "layers.2.attn.attn_sink") + ": tensor layers.2.attn.attn_sink: dtype I32, expected F32"));
  }
  SECTION("a truncated shard") {
    const std::string path = init_preset(dir, "tiny", true, 1);
    const std::string shard = shard_of(path, "embed.weight");
    fs::resize_file(path + "/" + shard, fs::file_size(path + "/" + shard) - 100);
    CHECK_THAT(load_error(path), Catch::Contains(shard + ": tensor ") && Catch::Contains("the shard is truncated"));
  }
  SECTION("a missing shard") {
    const std::string path = init_preset(dir, "tiny", true, 1);
    const std::string shard = shard_of(path, "head.weight");
    fs::remove(path + "/" + shard);
    CHECK_THAT(load_error(path), Catch::Contains(shard + ": cannot be opened"));
  }
  SECTION("an index that disagrees with the shards") {
    const std::string path = init_preset(dir, "tiny", true, 1);
    const std::string head_shard = shard_of(path, "head.weight");
    const std::string embed_shard = shard_of(path, "embed.weight");
    REQUIRE(head_shard != embed_shard);
    std::string index = read_file(path + "/" + std::string(kIndexFile));
    const std::string entry = "\"head.weight\": \"" + head_shard + "\"";
    REQUIRE(index.find(entry) != std::string::npos);
    index.replace(index.find(entry), entry.size(), "\"head.weight\": \"" + embed_shard + "\"");
    write_file(path + "/" + std::string(kIndexFile), index);
    CHECK_THAT(load_error(path), Catch::Contains(head_shard + ": tensor head.weight is in the shard but "
                                                 "model.safetensors.index.json places it in " + embed_shard));
  }
  SECTION("an index entry that escapes the directory") {
    const std::string path = init_preset(dir, "tiny", true, 1);
    write_file(path + "/" + std::string(kIndexFile), R"({"weight_map": {"embed.weight": "../x.safetensors"}})");
    CHECK_THAT(load_error(path), Catch::Contains("tensor embed.weight maps to '../x.safetensors', which is not a file name"));
  }
  SECTION("a config of another model type") {
    const std::string path = init_preset(dir, "tiny", true, 1);
    std::string config = read_file(path + "/config.json");
    config.replace(config.find("\"deepseek_v41\""), 14, "\"deepseek_v4\"");
    write_file(path + "/config.json", config);
    CHECK_THAT(load_error(path), Catch::Contains("config.json: model_type 'deepseek_v4' is not supported"));
  }
  SECTION("a plain config over quantised shards") {
    const std::string path = init_preset(dir, "tiny", true, 1);
    write_file(path + "/config.json", model_config_to_text(preset_config("tiny", false).value()));
    CHECK_THAT(load_error(path), Catch::Contains("tensor layers.0.attn.wq_a.weight: dtype F8_E4M3, expected BF16"));
  }
  SECTION("not a checkpoint directory") {
    CHECK_THAT(load_error(dir / "nowhere"), Catch::Contains("not a checkpoint directory"));
    fs::create_directories(dir / "empty");
    write_file(dir / "empty/config.json", model_config_to_text(preset_config("tiny", false).value()));
    CHECK_THAT(load_error(dir / "empty"), Catch::Contains("neither model.safetensors.index.json nor model.safetensors"));
  }
}

TEST_CASE("model init refuses a missing or unusable tokenizer and a non-empty output directory", "[checkpoint]") {
  TempDir dir;
  auto config = preset_config("tiny", true);
  REQUIRE(config.ok());
  InitOptions options;
  options.out_dir = dir / "out";
  options.tokenizer_dir = dir / "no-tokenizer";
  auto missing = init_checkpoint(*config, options);
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(missing.status().message(), Catch::Contains("tokenizer.json not found in") && Catch::Contains("--tokenizer"));
  CHECK_FALSE(fs::exists(dir / "out"));  // nothing written

  fs::create_directories(dir / "not-a-tokenizer");
  write_file(dir / "not-a-tokenizer/tokenizer.json", "{\"model\": 7}");
  options.tokenizer_dir = dir / "not-a-tokenizer";
  auto bogus = init_checkpoint(*config, options);
  REQUIRE_FALSE(bogus.ok());
  CHECK_THAT(bogus.status().message(), Catch::Contains("not-a-tokenizer/tokenizer.json"));
  CHECK_FALSE(fs::exists(dir / "out"));

  auto small = *config;
  small.text_config.vocab_size = 1000;
  options.tokenizer_dir = hippo::engine::testing::tokenizer_dir();
  auto too_small = init_checkpoint(small, options);
  REQUIRE_FALSE(too_small.ok());
  CHECK_THAT(too_small.status().message(), Catch::Contains("token ids do not fit the model's vocab_size 1000"));

  const std::string first = init_preset(dir, "tiny", true, 1, "out");
  auto again = init_checkpoint(*config, options);
  REQUIRE_FALSE(again.ok());
  CHECK(again.status().code() == hippo::ErrorCode::kAlreadyExists);
  CHECK_THAT(again.status().message(), Catch::Contains("not empty"));
}

TEST_CASE("a single-file checkpoint without an index loads too", "[checkpoint]") {
  TempDir dir;
  auto config = preset_config("tiny", false);
  REQUIRE(config.ok());
  InitOptions options;
  options.seed = 5;
  options.out_dir = dir / "one";
  options.tokenizer_dir = hippo::engine::testing::tokenizer_dir();
  options.max_shard_bytes = uint64_t{1} << 40;
  auto result = init_checkpoint(*config, options);
  REQUIRE(result.ok());
  REQUIRE(result->n_shards == 1);
  fs::rename(dir / ("one/" + shard_file_name(1, 1)), dir / "one/model.safetensors");
  fs::remove(dir / "one/model.safetensors.index.json");
  auto checkpoint = load_checkpoint(dir / "one");
  INFO(checkpoint.status().to_string());
  REQUIRE(checkpoint.ok());
  CHECK(checkpoint->n_shards() == 1);
}

TEST_CASE("the fingerprint tells checkpoints apart and is stable for one", "[checkpoint]") {
  TempDir dir;
  auto fingerprint = [&](uint64_t seed, bool quantised, const std::string& name) {
    auto checkpoint = hippo::engine::load_checkpoint(init_preset(dir, "tiny", quantised, seed, name));
    REQUIRE(checkpoint.ok());
    auto fp = hippo::engine::checkpoint_fingerprint(*checkpoint);
    REQUIRE(fp.ok());
    CHECK(fp->size() == 16);
    return *fp;
  };
  const std::string a = fingerprint(1, false, "a"), again = fingerprint(1, false, "again");
  CHECK(a == again);
  CHECK(fingerprint(2, false, "other-seed") != a);
  CHECK(fingerprint(1, true, "quantised") != a);
}

// A head tied to the embedding (tie_word_embeddings, as the demo model trains it) is stored once, as
// embed.weight, and read as the head: the logits equal an untied checkpoint's whose embed.weight holds
// its head's values.
TEST_CASE("a tied head is stored once and reads embed.weight", "[checkpoint]") {
  TempDir dir;
  const std::string untied = init_preset(dir, "tiny", true, 1, "untied");
  std::vector<std::byte> head_values;
  rewrite_shards(untied, [&](const std::string&, std::vector<ShardTensor>& tensors) {
    for (const ShardTensor& t : tensors)
      if (t.name == "head.weight") head_values = t.data;
  });
  REQUIRE(!head_values.empty());
  rewrite_shards(untied, [&](const std::string&, std::vector<ShardTensor>& tensors) {
    for (ShardTensor& t : tensors)
      if (t.name == "embed.weight") t.data = head_values;
  });
  const std::string tied = dir / "tied";
  fs::copy(untied, tied);
  rewrite_shards(tied, [](const std::string&, std::vector<ShardTensor>& tensors) {
    std::erase_if(tensors, [](const ShardTensor& t) { return t.name == "head.weight"; });
  });
  auto set_tied = [&](bool top, bool text) {
    boost::json::value config = boost::json::parse(read_file(tied + "/config.json"));
    config.as_object()["tie_word_embeddings"] = top;
    config.at("text_config").as_object()["tie_word_embeddings"] = text;
    write_file(tied + "/config.json", boost::json::serialize(config));
  };

  // Untied, a checkpoint without head.weight is incomplete; tied at one level only, ambiguous.
  CHECK_THAT(load_error(tied), Catch::Contains("head.weight"));
  set_tied(true, false);
  CHECK_THAT(load_error(tied), Catch::Contains("tie_word_embeddings"));
  set_tied(true, true);
  auto checkpoint = load_checkpoint(tied);
  INFO(checkpoint.status().to_string());
  REQUIRE(checkpoint.ok());
  CHECK(checkpoint->table().find("head.weight") == nullptr);
  CHECK(checkpoint->table().total_bytes() + static_cast<int64_t>(head_values.size()) ==
        load_checkpoint(untied)->table().total_bytes());

  std::vector<int32_t> ids(150);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 7919 + 13) % 120000);
  auto logits_of = [&](const std::string& path) {
    auto model = Model::load(path, ModelOptions{});
    INFO(model.status().to_string());
    REQUIRE(model.ok());
    SessionState state = (*model)->new_session();
    std::vector<float> logits;
    REQUIRE((*model)->forward(state, ids, &logits).ok());
    return logits;
  };
  const std::vector<float> expected = logits_of(untied);
  const std::vector<float> got = logits_of(tied);
  REQUIRE(got.size() == expected.size());
  CHECK(std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)) == 0);
}
