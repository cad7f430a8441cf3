// `hippo bench tokenizer`: encode throughput of the DeepSeek tokenizer and the cost per token of
// streaming detokenisation plus DSML parsing, on a golden corpus whose expected ids come from HF
// `tokenizers` (scripts/gen_tokenizer_golden.py). Every timed encode is checked against those ids:
// a fast wrong answer fails. scripts/bench_tokenizer.py runs HF single-threaded on the same corpus
// in the same run and prints both (docs/benchmarks/tokenizer.md).
#include "api/cli/bench_spread.h"
#include "api/cli/cli.h"
#include "engine/tokenizer/chat_encoding.h"
#include "engine/tokenizer/dsml_parser.h"
#include "engine/tokenizer/incremental_detokenizer.h"
#include "engine/tokenizer/python_json.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/utf8.h"

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <ostream>
#include <sstream>

namespace hippo::cli {
namespace {

using tokenizer::TokenId;

struct TokenizerBenchOptions {
  std::string tokenizer_path = ".cache/deepseek-v4-tokenizer/tokenizer.json";
  std::string corpus_path;
  int repetitions = 5;
  bool json = false;
};

struct Document {
  std::string text;
  std::vector<TokenId> ids;
};

Result<std::vector<Document>> read_corpus(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(ErrorCode::kNotFound, "{}: cannot open the corpus (scripts/gen_tokenizer_golden.py)", path);
  std::ostringstream contents;
  contents << in.rdbuf();
  const std::string data = contents.str();
  std::vector<Document> docs;
  std::size_t pos = 0;
  const auto read_u32 = [&](std::uint32_t& v) {
    if (pos + 4 > data.size()) return false;
    std::memcpy(&v, data.data() + pos, 4);
    pos += 4;
    return true;
  };
  while (pos < data.size()) {
    Document doc;
    std::uint32_t n = 0;
    if (!read_u32(n) || pos + n > data.size()) break;
    doc.text = data.substr(pos, n);
    pos += n;
    if (!read_u32(n) || pos + 4ull * n > data.size()) break;
    doc.ids.resize(n);
    if (n > 0) std::memcpy(doc.ids.data(), data.data() + pos, 4ull * n);
    pos += 4ull * n;
    docs.push_back(std::move(doc));
  }
  if (pos != data.size()) return make_error(ErrorCode::kCorrupt, "{}: truncated record at byte {}", path, pos);
  return docs;
}

// Tool-call completions as the model generates them: each corpus document up to 2 KB becomes the
// reasoning of one completion and the string argument of its calls, rendered by the chat encoder
// (V4.1, thinking mode) and cut after the generation prompt; ids from the tokenizer.
std::vector<std::vector<TokenId>> tool_call_completions(const tokenizer::Tokenizer& tok, const std::vector<Document>& docs) {
  using namespace tokenizer;
  std::vector<std::vector<TokenId>> completions;
  ChatOptions options;
  options.family = ModelFamily::kV41;
  options.tools.push_back({"search", "Search", R"({"type": "object"})"});
  for (std::size_t i = 0; i < docs.size() && completions.size() < 400; ++i) {
    if (docs[i].text.size() > 2048 || !is_valid_utf8(docs[i].text) || docs[i].text.find("</think>") != std::string::npos) {
      continue;
    }
    std::string quoted;
    append_python_json_string(docs[i].text, quoted);
    Message question;
    question.content = "q";
    Message answer;
    answer.role = Role::kAssistant;
    answer.reasoning = docs[i].text;
    answer.content = "Searching.";
    for (int call = 0; call < 3; ++call) {
      answer.tool_calls.push_back({std::to_string(call), "search", R"({"query": )" + quoted + R"(, "top_k": 5})"});
    }
    const std::vector<Message> messages{question, answer};
    Result<RenderedPrompt> prompt = render_chat(messages, options);
    if (!prompt.ok()) continue;
    // Everything after "<｜Assistant｜><think>" up to EOS is what the model writes.
    std::string text = prompt->text();
    const std::string_view header = "<｜Assistant｜><think>";
    const std::size_t begin = text.find(header) + header.size();
    const std::size_t end = text.rfind("<｜end▁of▁sentence｜>");
    completions.push_back(tok.encode(std::string_view(text).substr(begin, end - begin)));
  }
  return completions;
}

// Seconds per run: one warm-up, then `repetitions` timed runs.
template <typename Run>
Spread time_runs(int repetitions, Run&& run) {
  run();  // warm-up
  std::vector<double> seconds;
  for (int i = 0; i < repetitions; ++i) {
    const auto start = std::chrono::steady_clock::now();
    run();
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return spread_of(std::move(seconds));
}

Status run_tokenizer_bench(const TokenizerBenchOptions& options, std::ostream& out) {
  HIPPO_ASSIGN_OR_RETURN(auto tok, tokenizer::Tokenizer::load(options.tokenizer_path));
  HIPPO_ASSIGN_OR_RETURN(auto docs, read_corpus(options.corpus_path));
  std::size_t n_bytes = 0, n_tokens = 0;
  for (const Document& d : docs) {
    n_bytes += d.text.size();
    n_tokens += d.ids.size();
  }

  // Encode, single thread, checked.
  std::vector<TokenId> ids;
  std::size_t wrong = 0;
  const Spread encode = time_runs(options.repetitions, [&] {
    wrong = 0;
    for (const Document& d : docs) {
      ids.clear();
      tok.encode(d.text, ids);
      wrong += ids != d.ids;
    }
  });
  if (wrong != 0) {
    return make_error(ErrorCode::kInternal, "{} of {} documents encode differently from the corpus ids", wrong, docs.size());
  }

  // Stream ids through the detokenizer and the DSML parser, token by token: every corpus document
  // as an answer, and tool-call completions (reasoning, answer, a block of calls) as the model
  // writes them after a thinking-mode generation prompt.
  const std::vector<std::vector<TokenId>> completions = tool_call_completions(tok, docs);
  std::size_t n_completion_tokens = 0;
  for (const auto& c : completions) n_completion_tokens += c.size();
  std::size_t n_calls = 0, n_malformed = 0;
  const auto count = [&](const std::vector<tokenizer::DsmlEvent>& events) {
    for (const tokenizer::DsmlEvent& e : events) {
      n_calls += e.kind == tokenizer::DsmlEvent::Kind::kToolCallEnd;
      n_malformed += e.kind == tokenizer::DsmlEvent::Kind::kMalformed;
    }
  };
  const auto stream_all = [&](const auto& streams, bool thinking) {
    std::string piece;
    std::vector<tokenizer::DsmlEvent> events;
    for (const auto& ids_of : streams) {
      tokenizer::IncrementalDetokenizer detok(tok);
      tokenizer::DsmlStreamParser parser({tokenizer::ModelFamily::kV41, thinking});
      for (TokenId id : ids_of) {
        piece.clear();
        detok.push(id, piece);
        parser.push(piece, events);
        count(events);
        events.clear();
      }
      piece.clear();
      detok.finish(piece);
      parser.push(piece, events);
      parser.finish(events);
      count(events);
      events.clear();
    }
  };
  std::vector<std::vector<TokenId>> corpus_streams;
  for (const Document& d : docs) corpus_streams.push_back(d.ids);
  const Spread stream = time_runs(options.repetitions, [&] { stream_all(corpus_streams, false); });
  const Spread tool_stream = time_runs(options.repetitions, [&] {
    n_calls = n_malformed = 0;
    stream_all(completions, true);
  });
  if (n_calls != 3 * completions.size() || n_malformed != 0) {
    return make_error(ErrorCode::kInternal, "the tool-call completions parsed into {} calls and {} malformed blocks, not {}",
                      n_calls, n_malformed, 3 * completions.size());
  }

  const double mb = static_cast<double>(n_bytes) / 1e6;
  const double ns_per_token = stream.median * 1e9 / static_cast<double>(n_tokens);
  const double tool_ns_per_token = tool_stream.median * 1e9 / static_cast<double>(n_completion_tokens);
  if (options.json) {
    boost::json::object doc{
        {"documents", docs.size()},
        {"bytes", n_bytes},
        {"tokens", n_tokens},
        {"repetitions", options.repetitions},
        {"encode_seconds_median", encode.median},
        {"encode_seconds_min", encode.min},
        {"encode_seconds_max", encode.max},
        {"encode_mb_per_second", mb / encode.median},
        {"stream_seconds_median", stream.median},
        {"stream_ns_per_token", ns_per_token},
        {"tool_call_stream_ns_per_token", tool_ns_per_token},
        {"tool_call_stream_tokens", n_completion_tokens},
    };
    out << boost::json::serialize(doc) << "\n";
    return {};
  }
  out << fmt::format("corpus           {} documents, {:.2f} MB, {} tokens (ids checked against the corpus)\n",
                     docs.size(), mb, n_tokens);
  out << fmt::format("encode           {:.1f} MB/s  (median of {}; {:.3f} s, min {:.3f}, max {:.3f}; 1 thread)\n",
                     mb / encode.median, options.repetitions, encode.median, encode.min, encode.max);
  out << fmt::format("detok + DSML     {:.1f} ns/token  corpus as answers (median of {}; {:.3f} s, min {:.3f}, max {:.3f})\n",
                     ns_per_token, options.repetitions, stream.median, stream.min, stream.max);
  out << fmt::format("detok + DSML     {:.1f} ns/token  {} tool-call completions, {} tokens (median of {}; {:.3f} s)\n",
                     tool_ns_per_token, completions.size(), n_completion_tokens, options.repetitions,
                     tool_stream.median);
  return {};
}

}  // namespace

void add_bench_tokenizer_command(CLI::App& bench, Invocation& inv) {
  auto options = std::make_shared<TokenizerBenchOptions>();
  CLI::App* cmd = bench.add_subcommand("tokenizer", "Encode throughput and streaming detokenisation + DSML parsing");
  cmd->add_option("--tokenizer", options->tokenizer_path, "tokenizer.json (scripts/setup puts it here)")
      ->capture_default_str();
  cmd->add_option("--corpus", options->corpus_path, "Golden corpus from scripts/gen_tokenizer_golden.py")->required();
  cmd->add_option("--repetitions", options->repetitions, "Timed passes after one warm-up")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_flag("--json", options->json, "One JSON object instead of a table");
  cmd->parse_complete_callback([&inv, options] {
    inv.action = [&inv, options] { return run_tokenizer_bench(*options, *inv.out); };
  });
}

}  // namespace hippo::cli
