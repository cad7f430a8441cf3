#include "engine/model/model.h"

#include "engine/engram/engram_hash.h"
#include "engine/engram/engram_token_map.h"
#include "engine/model/forward_pass.h"
#include "engine/weights/checkpoint_fingerprint.h"
#include "kernels/backend_registry.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <limits>
#include <set>

namespace hippo::engine {
namespace {

// The shapes the storage formats and the QAT round trips need (the reference leaves a dimension it
// cannot block unquantised; hippo refuses such a config instead of storing floats).
Status check_supported(const TextConfig& t) {
  auto require = [](bool ok, std::string_view what) -> Status {
    if (ok) return Status::ok_status();
    return Status(ErrorCode::kFailedPrecondition, fmt::format("config.json: text_config: {}: not supported by hippo's engine", what));
  };
  HIPPO_RETURN_IF_ERROR(require(t.head_dim % 32 == 0, "head_dim must be a multiple of 32 (FP8 window blocks)"));
  HIPPO_RETURN_IF_ERROR(require(t.index_head_dim % 32 == 0 && t.index_head_dim <= 1024,
                                "index_head_dim must be a multiple of 32, at most 1024 (FP4 index blocks)"));
  HIPPO_RETURN_IF_ERROR(require(t.qk_rope_head_dim % 2 == 0 && t.qk_rope_head_dim <= t.index_head_dim &&
                                    t.qk_rope_head_dim <= Rope::kMaxRopeDims,
                                "qk_rope_head_dim must be even, fit the index keys and be at most 512"));
  for (int64_t ratio : t.compress_ratios) HIPPO_RETURN_IF_ERROR(require(ratio <= 64, "compress ratios above 64"));
  return Status::ok_status();
}

// Calls fn(view, what) for every matrix the forward pass gives the linear op, `what` naming its
// place for messages, until fn returns an error.
template <typename Fn>
Status for_each_linear_weight(const ModelWeights& w, Fn fn) {
  HIPPO_RETURN_IF_ERROR(fn(w.head, "the head"));
  std::vector<std::pair<const LayerWeights*, std::string>> blocks;
  for (size_t l = 0; l < w.layers.size(); ++l) blocks.emplace_back(&w.layers[l], fmt::format("layer {}", l));
  if (w.dspark) {
    for (const kernels::WeightView* view : {&w.dspark->main_proj, &w.dspark->confidence})
      HIPPO_RETURN_IF_ERROR(fn(*view, "the DSpark draft"));
    for (size_t s = 0; s < w.dspark->stages.size(); ++s) blocks.emplace_back(&w.dspark->stages[s], fmt::format("DSpark stage {}", s));
  }
  for (const auto& [block, at] : blocks) {
    const LayerWeights& lw = *block;
    for (const kernels::WeightView* view :
         {&lw.hc_attn_fn, &lw.hc_ffn_fn, &lw.wq_a, &lw.wq_b, &lw.wkv, &lw.wo_a, &lw.wo_b, &lw.compressor_wkv, &lw.compressor_wgate,
          &lw.index_wk, &lw.index_wq_b, &lw.index_weights_proj, &lw.router, &lw.engram.wkv})
      HIPPO_RETURN_IF_ERROR(fn(*view, at));
    for (const ExpertWeights& e : lw.experts)
      for (const kernels::WeightView* view : {&e.w1, &e.w2, &e.w3}) HIPPO_RETURN_IF_ERROR(fn(*view, at + "'s experts"));
    if (lw.has_shared_expert)
      for (const kernels::WeightView* view : {&lw.shared_expert.w1, &lw.shared_expert.w2, &lw.shared_expert.w3})
        HIPPO_RETURN_IF_ERROR(fn(*view, at + "'s shared expert"));
  }
  return Status::ok_status();
}

// Every op the forward pass calls, every weight format its linear layers read and the formats of
// the tables it gathers from.
Status check_backend(const kernels::Backend& backend, const ModelWeights& w) {
  auto refuse = [&](std::string_view what) {
    return Status(ErrorCode::kFailedPrecondition, fmt::format("backend '{}' has no {}", backend.name(), what));
  };
  for (kernels::Op op : kernels::kAllOps)
    if (!backend.supports(op)) return refuse(fmt::format("op '{}', which the forward pass calls", kernels::op_name(op)));
  auto check_table = [&](const kernels::RowTable& table, std::string_view what) -> Status {
    if (backend.supports(table.format)) return Status::ok_status();
    return refuse(fmt::format("gather op for table format '{}', which {} needs", kernels::table_format_name(table.format), what));
  };
  HIPPO_RETURN_IF_ERROR(check_table(w.embed, "the embedding"));
  if (w.dspark) {
    HIPPO_RETURN_IF_ERROR(check_table(w.dspark->markov_embed, "the DSpark Markov head"));
    HIPPO_RETURN_IF_ERROR(check_table(w.dspark->markov_head, "the DSpark Markov head"));
  }
  for (size_t l = 0; l < w.layers.size(); ++l)
    if (w.layers[l].has_engram) HIPPO_RETURN_IF_ERROR(check_table(w.layers[l].engram.table, fmt::format("layer {}'s Engram table", l)));
  return for_each_linear_weight(w, [&](const kernels::WeightView& view, std::string_view tensor) -> Status {
    if (view.data == nullptr || backend.supports(view.format)) return Status::ok_status();
    return refuse(fmt::format("linear op for weight format '{}', which {} needs", kernels::weight_format_name(view.format), tensor));
  });
}

// Hands the backend every matrix once (a device backend uploads them here), and drops the pages of
// the codes it copied: the mapping would otherwise hold a second copy in this process's memory. A
// head tied to the embedding keeps its pages: the embedding's rows are still read from them.
Status keep_weights(kernels::Backend& backend, const Checkpoint& checkpoint, const ModelWeights& w) {
  return for_each_linear_weight(w, [&](const kernels::WeightView& view, std::string_view tensor) -> Status {
    if (view.data == nullptr) return Status::ok_status();
    const Result<bool> copied = backend.keep_weight(view);
    if (!copied.ok()) return copied.status().with_context(tensor);
    if (*copied && view.data != w.embed.data)
      checkpoint.drop_pages(view.data, static_cast<size_t>(kernels::code_span_bytes(view)));
    return Status::ok_status();
  });
}

}  // namespace

Model::Model(Checkpoint checkpoint, std::unique_ptr<kernels::Backend> backend)
    : checkpoint_(std::move(checkpoint)),
      weights_(bind_model_weights(checkpoint_)),
      main_rope_(Rope::main(checkpoint_.config().text_config)),
      compress_rope_(Rope::compress(checkpoint_.config().text_config)),
      backend_(std::move(backend)) {}

Model::~Model() = default;

Result<std::unique_ptr<Model>> Model::load(const std::string& dir, const ModelOptions& options) {
  HIPPO_ASSIGN_OR_RETURN(std::unique_ptr<kernels::Backend> backend, kernels::make_backend(options.backend, options.n_threads));
  return load(dir, std::move(backend), options);
}

Result<std::unique_ptr<Model>> Model::load(const std::string& dir, std::unique_ptr<kernels::Backend> backend,
                                           const ModelOptions& options) {
  HIPPO_ASSIGN_OR_RETURN(Checkpoint checkpoint, load_checkpoint(dir));
  HIPPO_RETURN_IF_ERROR(check_supported(checkpoint.config().text_config).with_context(dir));
  HIPPO_ASSIGN_OR_RETURN(std::string fingerprint, checkpoint_fingerprint(checkpoint));
  std::unique_ptr<Model> model(new Model(std::move(checkpoint), std::move(backend)));
  HIPPO_RETURN_IF_ERROR(check_backend(*model->backend_, model->weights_).with_context(dir));
  HIPPO_RETURN_IF_ERROR(keep_weights(*model->backend_, model->checkpoint_, model->weights_).with_context(dir));
  model->fingerprint_ = std::move(fingerprint);
  if (!model->text().engram_layer_ids.empty()) {
    const std::string tokenizer_dir = options.tokenizer_dir.empty() ? dir : options.tokenizer_dir;
    const std::filesystem::path tokenizer_json = std::filesystem::path(tokenizer_dir) / "tokenizer.json";
    HIPPO_ASSIGN_OR_RETURN(EngramTokenMap map, EngramTokenMap::build(tokenizer_json));
    HIPPO_RETURN_IF_ERROR(check_engram_token_map(model->text(), map).with_context(tokenizer_json.string()));
    HIPPO_ASSIGN_OR_RETURN(EngramHasher hasher, EngramHasher::create(model->text(), map));
    model->engram_map_ = std::make_unique<EngramTokenMap>(std::move(map));
    model->engram_hasher_ = std::make_unique<EngramHasher>(std::move(hasher));
  }
  return model;
}

Status Model::forward(std::span<ForwardRequest> batch) {
  std::vector<ForwardPass::Segment> segments;
  std::set<const SessionState*> seen;
  for (const ForwardRequest& request : batch) {
    if (request.state == nullptr || request.tokens.empty()) {
      return Status(ErrorCode::kInvalidArgument, "forward: every request needs a session and at least one token");
    }
    if (!seen.insert(request.state).second) {
      return Status(ErrorCode::kInvalidArgument, "forward: a session appears twice in one batch");
    }
    if (request.state->has_draft()) {
      return Status(ErrorCode::kFailedPrecondition, "forward: the session's last draft is not settled");
    }
    if (request.draft && (request.all_logits == nullptr ||
                          static_cast<int64_t>(request.tokens.size()) > text().sliding_window)) {
      return Status(ErrorCode::kInvalidArgument,
                    fmt::format("forward: a draft needs all logits and at most {} tokens", text().sliding_window));
    }
    for (int32_t token : request.tokens) {
      if (token < 0 || token >= text().vocab_size) {
        return Status(ErrorCode::kInvalidArgument,
                      fmt::format("forward: token id {} is outside the vocabulary [0, {})", token, text().vocab_size));
      }
    }
    if (request.state->n_tokens() + static_cast<int64_t>(request.tokens.size()) > text().max_position_embeddings) {
      return Status(ErrorCode::kResourceExhausted,
                    fmt::format("forward: {} tokens would exceed the model's context of {}",
                                request.state->n_tokens() + static_cast<int64_t>(request.tokens.size()),
                                text().max_position_embeddings));
    }
    ForwardPass::Segment segment;
    segment.state = request.state;
    segment.tokens = request.tokens;
    segment.all_logits = request.all_logits;
    segments.push_back(segment);
  }
  if (segments.empty()) return Status::ok_status();
  int64_t rows = 0;
  bool decode_shaped = true;  // every session fed one token or a draft: a step whose cost drafters weigh
  for (const ForwardRequest& request : batch) {
    if (request.draft) record_draft(*request.state, static_cast<int64_t>(request.tokens.size()));
    rows += static_cast<int64_t>(request.tokens.size());
    decode_shaped = decode_shaped && (request.draft || request.tokens.size() == 1);
  }
  const auto started = std::chrono::steady_clock::now();
  ForwardPass(*this, std::move(segments), ForwardPass::Depth::kFull).run();
  if (decode_shaped) {
    step_costs_.record_forward(static_cast<int64_t>(batch.size()), rows,
                               std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  }
  return Status::ok_status();
}

Status Model::forward(SessionState& state, std::span<const int32_t> tokens, std::vector<float>* all_logits) {
  ForwardRequest request;
  request.state = &state;
  request.tokens = tokens;
  request.all_logits = all_logits;
  return forward(std::span<ForwardRequest>(&request, 1));
}

int64_t Model::decoder_tail_tokens() const {
  const TextConfig& t = text();
  if (t.candidate_source_layer_id < 0) return std::numeric_limits<int64_t>::max();
  // The layers from the candidate source upward must see the tail that rebuilds their windows: the
  // last layer its own window, every layer below it window - 1 more tokens (docs/engine.md).
  const int64_t upper_layers = t.num_hidden_layers - t.candidate_source_layer_id;
  return t.sliding_window + (upper_layers - 1) * (t.sliding_window - 1);
}

Status Model::forward_encoder(SessionState& state, std::span<const int32_t> tokens) {
  const TextConfig& t = text();
  if (tokens.empty()) return Status(ErrorCode::kInvalidArgument, "forward_encoder: no tokens");
  if (state.has_draft()) return Status(ErrorCode::kFailedPrecondition, "prefill: the session's last draft is not settled");
  if (t.candidate_source_layer_id < 0) return forward(state, tokens);
  for (int32_t token : tokens) {
    if (token < 0 || token >= t.vocab_size) {
      return Status(ErrorCode::kInvalidArgument,
                    fmt::format("prefill: token id {} is outside the vocabulary [0, {})", token, t.vocab_size));
    }
  }
  if (state.n_tokens() + static_cast<int64_t>(tokens.size()) > t.max_position_embeddings) {
    return Status(ErrorCode::kResourceExhausted, fmt::format("prefill: {} tokens would exceed the model's context of {}",
                                                             state.n_tokens() + static_cast<int64_t>(tokens.size()),
                                                             t.max_position_embeddings));
  }
  ForwardPass::Segment segment;
  segment.state = &state;
  segment.tokens = tokens;
  ForwardPass(*this, {segment}, ForwardPass::Depth::kEncoder).run();
  return Status::ok_status();
}

Status Model::prefill(SessionState& state, std::span<const int32_t> tokens, const PrefillOptions& options) {
  if (options.chunk_tokens <= 0) return Status(ErrorCode::kInvalidArgument, "prefill: chunk_tokens must be positive");
  const int64_t total = static_cast<int64_t>(tokens.size());
  const int64_t encoder_tokens = options.encoder_decoder_plan ? std::max<int64_t>(0, total - decoder_tail_tokens()) : 0;
  int64_t done = 0;
  while (done < total) {
    const bool encoder = done < encoder_tokens;
    const int64_t end = std::min(done + options.chunk_tokens, encoder ? encoder_tokens : total);
    const std::span<const int32_t> chunk = tokens.subspan(static_cast<size_t>(done), static_cast<size_t>(end - done));
    HIPPO_RETURN_IF_ERROR(encoder ? forward_encoder(state, chunk) : forward(state, chunk));
    done = end;
    if (options.progress) options.progress(done, total);
  }
  return Status::ok_status();
}

}  // namespace hippo::engine
