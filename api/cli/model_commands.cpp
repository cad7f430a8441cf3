// `hippo model …`: `init` writes a deterministic random checkpoint from a preset; `inspect` prints a
// checkpoint's (or a bare config.json's) structure, parameter counts and KV bytes per token; `render`
// is model_render.cpp.
#include "api/cli/cli.h"
#include "api/cli/default_model.h"
#include "base/log.h"
#include "engine/config/layer_schedule.h"
#include "engine/config/presets.h"
#include "engine/model/model_summary.h"
#include "engine/weights/checkpoint.h"
#include "engine/weights/init_checkpoint.h"
#include "engine/weights/tensor_table.h"

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <ostream>

namespace hippo::cli {
namespace {

namespace fs = std::filesystem;
using engine::ModelConfig;

struct InitCommand {
  std::string preset;
  uint64_t seed = 0;
  std::string out_dir;
  std::string format = "quantised";
  std::string tokenizer_dir = default_tokenizer_dir();
  uint64_t max_shard_bytes = engine::kDefaultMaxShardBytes;
};

struct InspectCommand {
  std::string path;
  bool json = false;
  bool tensors = false;
};

// 22.2 MB, 510.3 GB
std::string megabytes(uint64_t bytes) {
  const auto x = static_cast<double>(bytes);
  return x >= 1e9 ? fmt::format("{:.1f} GB", x / 1e9) : fmt::format("{:.1f} MB", x / 1e6);
}

// 552.0B, 14.2M, 4.1K
std::string count(int64_t n) {
  const auto x = static_cast<double>(n);
  if (n >= 1'000'000'000) return fmt::format("{:.1f}B", x / 1e9);
  if (n >= 1'000'000) return fmt::format("{:.1f}M", x / 1e6);
  if (n >= 1'000) return fmt::format("{:.1f}K", x / 1e3);
  return fmt::format("{}", n);
}

Status run_init(const InitCommand& command, std::ostream& out) {
  if (command.format != "plain" && command.format != "quantised")
    return make_error(ErrorCode::kInvalidArgument, "--format must be plain or quantised, not '{}'", command.format);
  HIPPO_ASSIGN_OR_RETURN(ModelConfig config, engine::preset_config(command.preset, command.format == "quantised"));
  const auto start = std::chrono::steady_clock::now();
  engine::InitOptions options;
  options.seed = command.seed;
  options.out_dir = command.out_dir;
  options.tokenizer_dir = command.tokenizer_dir;
  options.max_shard_bytes = command.max_shard_bytes;
  options.progress = [](const engine::InitProgress& p) {
    log::info("model init", {{"shard", p.shard}, {"shards", p.n_shards}, {"mb", static_cast<double>(p.bytes) / 1e6},
                             {"total_mb", static_cast<double>(p.total_bytes) / 1e6}});
  };
  HIPPO_ASSIGN_OR_RETURN(engine::InitResult result, engine::init_checkpoint(config, options));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out << fmt::format("wrote {} ({}, seed {}) to {}: {} tensors, {} shards, {} in {:.2f} s\n", command.preset,
                     command.format, command.seed, command.out_dir, result.n_tensors, result.n_shards,
                     megabytes(result.tensor_bytes), seconds);
  return {};
}

// Consecutive layers with the same role description, as "3-7 reuse kv 2, top-k 2".
std::vector<std::string> layer_lines(const engine::TextConfig& text) {
  std::vector<std::string> lines;
  const auto roles = engine::layer_schedule(text);
  for (size_t i = 0; i < roles.size();) {
    const std::string role = engine::describe_role(roles[i]);
    size_t j = i + 1;
    while (j < roles.size() && engine::describe_role(roles[j]) == role) ++j;
    lines.push_back(j - i == 1 ? fmt::format("{:>7}  {}", i, role) : fmt::format("{:>7}  {}", fmt::format("{}-{}", i, j - 1), role));
    i = j;
  }
  return lines;
}

boost::json::object summary_json(const ModelConfig& config, const engine::TensorTable& table,
                                 const engine::ParameterCounts& params, const engine::KvFootprint& kv) {
  boost::json::array layers;
  for (const engine::LayerRole& r : engine::layer_schedule(config.text_config))
    layers.push_back(boost::json::object{{"layer", r.layer},
                                         {"compress_ratio", r.compress_ratio},
                                         {"kv_source", r.kv_source},
                                         {"index_source", r.index_source},
                                         {"writes_kv", r.writes_kv},
                                         {"candidate_source", r.candidate_source},
                                         {"reindex", r.reindex},
                                         {"engram", r.engram},
                                         {"role", engine::describe_role(r)}});
  boost::json::object by_component;
  for (const auto& [name, n] : params.by_component) by_component[name] = n;
  return {
      {"model_type", config.model_type},
      {"quantised", config.quantised()},
      {"layers", std::move(layers)},
      {"parameters",
       {{"total", params.total},
        {"backbone", params.backbone},
        {"engram", params.engram},
        {"dspark", params.dspark},
        {"vision", params.vision},
        {"active_decode", params.active_decode},
        {"active_prefill", params.active_prefill},
        {"by_component", std::move(by_component)}}},
      {"kv",
       {{"bytes_per_token", kv.bytes_per_token},
        {"main_entry_bytes", kv.main_entry_bytes},
        {"index_entry_bytes", kv.index_entry_bytes},
        {"window_bytes_per_layer", kv.window_bytes_per_layer},
        {"window_bytes", kv.window_bytes}}},
      {"tensors", {{"count", table.tensors().size()}, {"bytes", table.total_bytes()}}},
      {"config", engine::model_config_to_json(config)},
  };
}

void print_summary(const ModelConfig& config, const engine::ParameterCounts& params, const engine::KvFootprint& kv,
                   std::ostream& out) {
  const engine::TextConfig& t = config.text_config;
  std::string storage = "plain (BF16/F32)";
  if (const auto& q = config.quantization_config)
    storage = fmt::format("quantised: FP8 E4M3 blocks {}x{} with UE8M0 scales, {} experts", q->weight_block_size[0],
                          q->weight_block_size[1], q->expert_dtype);
  out << fmt::format("model        {} ({}), {}\n", config.model_type, fmt::join(config.architectures, ", "), storage);
  out << fmt::format("text         {} layers + {} DSpark stages, hidden {}, vocab {}{}, mHC x{}\n", t.num_hidden_layers,
                     t.num_nextn_predict_layers, t.hidden_size, t.vocab_size,
                     t.tie_word_embeddings ? " (head tied to the embedding)" : "", t.hc_mult);
  out << fmt::format("attention    {} heads x {} (rope {}), q rank {}, output {} groups x {}, window {}\n",
                     t.num_attention_heads, t.head_dim, t.qk_rope_head_dim, t.q_lora_rank, t.o_groups, t.o_lora_rank,
                     t.sliding_window);
  out << fmt::format("indexer      {} heads x {}, top {}; candidate source {}: top {} blocks of {}\n", t.index_n_heads,
                     t.index_head_dim, t.index_topk, t.candidate_source_layer_id, t.candidate_topk_blocks,
                     t.candidate_block_size);
  out << fmt::format("moe          {} routed (top {}) + {} shared, width {}\n", t.n_routed_experts,
                     t.num_experts_per_tok, t.n_shared_experts, t.moe_intermediate_size);
  out << fmt::format("engram       layers {}: {} rows x {}, n-grams 2..{}, {} heads each\n",
                     fmt::join(t.engram_layer_ids, ", "), fmt::join(t.engram_num_embeddings, " + "), t.engram_head_dim,
                     t.engram_max_ngram_size, t.engram_n_heads);
  out << fmt::format("dspark       {} stages, {} routed (top {}), targets {}\n", t.num_nextn_predict_layers,
                     t.dspark_n_routed_experts, t.dspark_num_experts_per_tok, fmt::join(t.dspark_target_layer_ids, ", "));
  out << fmt::format("vision       {} blocks, hidden {}\n", config.vision_config.num_hidden_layers,
                     config.vision_config.hidden_size);
  out << "layers\n";
  for (const std::string& line : layer_lines(t)) out << line << "\n";
  out << fmt::format("parameters   total {}  backbone {}  engram {}  dspark {}  vision {}\n", count(params.total),
                     count(params.backbone), count(params.engram), count(params.dspark), count(params.vision));
  out << fmt::format("active/token decode {}  prefill {}\n", count(params.active_decode), count(params.active_prefill));
  out << fmt::format("kv           {:g} B/token (entries: {} B KV + {} B index key); windows {} per session ({} x {} B)\n",
                     kv.bytes_per_token, kv.main_entry_bytes, kv.index_entry_bytes, megabytes(static_cast<uint64_t>(kv.window_bytes)),
                     t.num_hidden_layers + t.num_nextn_predict_layers, kv.window_bytes_per_layer);
}

Status run_inspect(const InspectCommand& command, std::ostream& out) {
  std::error_code ec;
  const bool is_dir = fs::is_directory(command.path, ec);
  std::optional<engine::Checkpoint> checkpoint;
  ModelConfig config;
  if (is_dir) {
    HIPPO_ASSIGN_OR_RETURN(auto loaded, engine::load_checkpoint(command.path));
    checkpoint.emplace(std::move(loaded));
    config = checkpoint->config();
  } else {
    HIPPO_ASSIGN_OR_RETURN(config, engine::load_model_config(command.path));
  }
  std::optional<engine::TensorTable> config_table;  // a checkpoint brings its own
  if (!checkpoint) config_table.emplace(engine::TensorTable::build(config));
  const engine::TensorTable& table = checkpoint ? checkpoint->table() : *config_table;
  const engine::ParameterCounts params = engine::count_parameters(config, table);
  const engine::KvFootprint kv = engine::kv_footprint(config.text_config);

  if (command.json) {
    boost::json::object doc = summary_json(config, table, params, kv);
    if (checkpoint)
      doc["checkpoint"] = {{"dir", checkpoint->dir()},
                           {"shards", checkpoint->n_shards()},
                           {"tensors", table.tensors().size()},
                           {"mapped_bytes", checkpoint->mapped_bytes()},
                           {"resident_bytes", checkpoint->resident_bytes()}};
    if (command.tensors) {
      boost::json::array list;
      for (const engine::TensorSpec& spec : table.tensors()) {
        boost::json::array shape;
        for (int64_t d : spec.shape) shape.push_back(d);
        boost::json::object entry{{"name", spec.name}, {"dtype", engine::dtype_name(spec.dtype)}, {"shape", shape}};
        if (checkpoint) entry["shard"] = *checkpoint->tensor(spec.name).shard;
        list.push_back(std::move(entry));
      }
      doc["tensor_list"] = std::move(list);
    }
    out << boost::json::serialize(doc) << "\n";
    return {};
  }
  print_summary(config, params, kv, out);
  out << fmt::format("tensors      {} in the {} layout, {} ({:.1f} GiB)\n", table.tensors().size(),
                     config.quantised() ? "quantised" : "plain", megabytes(static_cast<uint64_t>(table.total_bytes())),
                     static_cast<double>(table.total_bytes()) / (1u << 30));
  if (checkpoint)
    out << fmt::format("checkpoint   {} tensors in {} shards, {} mapped, {} resident\n", table.tensors().size(),
                       checkpoint->n_shards(), megabytes(checkpoint->mapped_bytes()),
                       megabytes(checkpoint->resident_bytes()));
  if (command.tensors)
    for (const engine::TensorSpec& spec : table.tensors())
      out << fmt::format("  {:<48} {:<8} {:<16}{}\n", spec.name, engine::dtype_name(spec.dtype),
                         engine::shape_string(spec.shape), checkpoint ? " " + *checkpoint->tensor(spec.name).shard : "");
  return {};
}

}  // namespace

void add_model_commands(CLI::App& app, Invocation& inv) {
  CLI::App* model = app.add_subcommand("model", "Create and inspect model checkpoints");
  model->require_subcommand(1);

  auto init = std::make_shared<InitCommand>();
  CLI::App* init_cmd = model->add_subcommand("init", "Write a deterministic random checkpoint in the release layout");
  init_cmd
      ->add_option("--preset", init->preset,
                   "tiny, small-fullkv, wide or demo (the trained default model's init; engine/config/presets.h)")
      ->required()
      ->check(CLI::IsMember(engine::preset_names()));
  init_cmd->add_option("--seed", init->seed, "Seed; the same seed gives the same bytes on every machine")->required();
  init_cmd->add_option("--out", init->out_dir, "Directory to create (must not exist or be empty)")->required();
  init_cmd->add_option("--format", init->format, "quantised (FP8 dense, FP4 experts, FP8 Engram) or plain (BF16/F32)")
      ->check(CLI::IsMember({"plain", "quantised"}))
      ->capture_default_str();
  init_cmd->add_option("--tokenizer", init->tokenizer_dir, "Directory holding tokenizer.json")->capture_default_str();
  init_cmd->add_option("--max-shard-size", init->max_shard_bytes, "Close a shard at this size (e.g. 8MiB)")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  init_cmd->parse_complete_callback([&inv, init] {
    inv.action = [&inv, init] { return run_init(*init, *inv.out); };
  });

  auto inspect = std::make_shared<InspectCommand>();
  CLI::App* inspect_cmd = model->add_subcommand("inspect", "Print a checkpoint's structure, parameters and KV bytes");
  inspect_cmd->add_option("path", inspect->path, "Checkpoint directory, or a config.json alone")->required();
  inspect_cmd->add_flag("--json", inspect->json, "One JSON object instead of a table");
  inspect_cmd->add_flag("--tensors", inspect->tensors, "Also list every tensor: name, dtype, shape (and shard)");
  inspect_cmd->parse_complete_callback([&inv, inspect] {
    inv.action = [&inv, inspect] { return run_inspect(*inspect, *inv.out); };
  });

  add_model_render_command(*model, inv);
}

}  // namespace hippo::cli
