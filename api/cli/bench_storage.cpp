// `hippo bench storage`: snapshot and restore of a synthetic small-fullkv session state through the
// real store (SQLite included), against the `zstd` command on the same bytes at the same level in
// the same run; compression per stream with and without the byte-plane filter; the bytes an
// incremental snapshot after 1% more tokens writes; peak extra memory. Results belong in
// docs/benchmarks/storage.md.
#include "api/cli/bench_spread.h"
#include "api/cli/cli.h"
#include "api/cli/process_memory.h"
#include "api/cli/token_count.h"
#include "api/cli/synthetic_kv_state.h"
#include "storage/kv_snapshot_writer.h"
#include "storage/store.h"

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <malloc.h>
#include <ostream>
#include <random>
#include <spawn.h>
#include <sys/wait.h>

extern char** environ;

namespace hippo::cli {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct StorageBenchOptions {
  std::vector<std::string> tokens = {"32K", "128K", "1M"};
  int level = 3;
  int threads = 2;
  int repetitions = 3;
  std::string dir;
  bool json = false;
};

// Measures the peak resident memory that `body` adds on top of what was resident before it.
// Free heap memory is first handed back to the system (malloc_trim), so that memory left resident
// by earlier work cannot hide what `body` needs.
template <typename Body>
auto measure_peak_extra(std::int64_t& peak_extra, Body body) {
  malloc_trim(0);
  reset_peak_rss();
  const std::int64_t before = proc_status_bytes("VmRSS:");
  auto result = body();
  peak_extra = std::max<std::int64_t>(0, proc_status_bytes("VmHWM:") - before);
  return result;
}

Result<double> run_zstd(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  std::vector<std::string> owned = args;
  for (auto& a : owned) argv.push_back(a.data());
  argv.push_back(nullptr);
  const auto start = Clock::now();
  pid_t pid = 0;
  if (posix_spawnp(&pid, "zstd", nullptr, nullptr, argv.data(), environ) != 0)
    return make_error(ErrorCode::kUnavailable, "bench storage: cannot run the zstd command, the benchmark's peer "
                                               "(Debian package zstd)");
  int status = 0;
  waitpid(pid, &status, 0);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return make_error(ErrorCode::kInternal, "bench storage: zstd {} failed", fmt::join(args, " "));
  return seconds;
}

void remove_db(const std::string& path) {
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(path + suffix);
}

storage::SnapshotRequest make_request(const SyntheticKvState& state, std::int64_t n_tokens) {
  storage::SnapshotRequest request{"bench", "synthetic:small-fullkv:890", n_tokens, state.frontier, {}, {}};
  for (const auto& s : state.streams)
    request.streams.push_back({s.name, s.entry_bytes, storage::Filter::kBytePlane, s.prefix(n_tokens)});
  return request;
}

struct SizeResult {
  std::int64_t n_tokens = 0;
  std::int64_t raw_bytes = 0;
  std::int64_t stored_bytes = 0;
  Spread snapshot_s, checkpoint_s, restore_s, zstd_compress_s, zstd_decompress_s;
  std::int64_t zstd_bytes = 0;
  std::int64_t incremental_bytes = 0;         // everything the incremental snapshot wrote
  std::int64_t incremental_stream_bytes = 0;  // without the frontier, which every snapshot rewrites
  std::int64_t stream_stored_bytes = 0;       // the full snapshot without its frontier
  double incremental_s = 0;
  std::int64_t peak_snapshot = 0, peak_restore = 0;
  storage::SnapshotInfo snapshot;
};

Result<SizeResult> bench_size(const SyntheticKvState& state, std::int64_t n_tokens, const StorageBenchOptions& options,
                              const fs::path& dir) {
  SizeResult r;
  r.n_tokens = n_tokens;
  const std::string db = (dir / "bench.db").string();
  storage::StoreOptions store_options;
  store_options.zstd_level = options.level;
  store_options.codec_threads = static_cast<std::size_t>(options.threads);
  const storage::SnapshotRequest request = make_request(state, n_tokens);

  // The peer's input: exactly the bytes a snapshot stores, streams then frontier.
  const std::string raw_file = (dir / "state.raw").string();
  {
    std::ofstream raw(raw_file, std::ios::binary | std::ios::trunc);
    for (const auto& s : request.streams)
      raw.write(reinterpret_cast<const char*>(s.bytes.data()), static_cast<std::streamsize>(s.bytes.size()));
    raw.write(reinterpret_cast<const char*>(state.frontier.data()), static_cast<std::streamsize>(state.frontier.size()));
    if (!raw.flush()) return make_error(ErrorCode::kIoError, "bench storage: cannot write {}", raw_file);
  }
  // Restore targets, allocated and touched before any measurement.
  std::vector<std::vector<std::byte>> buffers;
  std::vector<storage::RestoreTarget> targets;
  for (const auto& s : request.streams) buffers.emplace_back(s.bytes.size(), std::byte{0});
  for (std::size_t i = 0; i < request.streams.size(); ++i) targets.push_back({request.streams[i].name, buffers[i]});

  std::vector<double> snapshot_s, checkpoint_s, restore_s, compress_s, decompress_s;
  for (int rep = -1; rep < options.repetitions; ++rep) {  // rep -1 is the warm-up
    remove_db(db);
    {
      HIPPO_ASSIGN_OR_RETURN(auto store, storage::SessionStore::open(db, store_options));
      HIPPO_RETURN_IF_ERROR(store->create_session({"bench", std::nullopt, request.fingerprint}).status());
    }
    std::int64_t peak = 0;
    HIPPO_ASSIGN_OR_RETURN(auto writer, storage::KvSnapshotWriter::open(db, store_options));
    auto [seconds, stats] = measure_peak_extra(peak, [&] {
      const auto start = Clock::now();
      auto submitted = writer->submit(request);
      Result<storage::SnapshotWriteStats> outcome =
          submitted.ok() ? submitted->get() : Result<storage::SnapshotWriteStats>(submitted.status());
      return std::pair{std::chrono::duration<double>(Clock::now() - start).count(), std::move(outcome)};
    });
    HIPPO_RETURN_IF_ERROR(stats.status());
    // The writer checkpoints the WAL into the database file after the future is ready; closing it
    // waits for that copy, which is timed on its own.
    const auto checkpoint_start = Clock::now();
    writer.reset();
    const double checkpoint = std::chrono::duration<double>(Clock::now() - checkpoint_start).count();
    if (rep >= 0) {
      snapshot_s.push_back(seconds);
      checkpoint_s.push_back(checkpoint);
      r.peak_snapshot = std::max(r.peak_snapshot, peak);
    }

    HIPPO_ASSIGN_OR_RETURN(auto reader, storage::SessionStore::open(db, store_options));
    for (auto& b : buffers) std::fill(b.begin(), b.end(), std::byte{0});
    Status restored = measure_peak_extra(peak, [&]() -> Status {
      const auto start = Clock::now();
      HIPPO_ASSIGN_OR_RETURN(auto latest, reader->latest_snapshot("bench"));
      if (!latest) return make_error(ErrorCode::kInternal, "bench storage: the snapshot is missing");
      HIPPO_ASSIGN_OR_RETURN(auto frontier, reader->restore_snapshot(*latest, request.fingerprint, targets));
      seconds = std::chrono::duration<double>(Clock::now() - start).count();
      if (frontier != state.frontier) return make_error(ErrorCode::kInternal, "bench storage: frontier restored wrong");
      r.snapshot = *latest;
      return {};
    });
    HIPPO_RETURN_IF_ERROR(restored);
    for (std::size_t i = 0; i < buffers.size(); ++i)  // a fast wrong answer fails
      if (!std::equal(buffers[i].begin(), buffers[i].end(), request.streams[i].bytes.begin()))
        return make_error(ErrorCode::kInternal, "bench storage: stream {} restored wrong", request.streams[i].name);
    if (rep >= 0) {
      restore_s.push_back(seconds);
      r.peak_restore = std::max(r.peak_restore, peak);
    }

    const std::string zst = raw_file + ".zst";
    HIPPO_ASSIGN_OR_RETURN(double c, run_zstd({"zstd", "-q", "-f", fmt::format("-{}", options.level),
                                               fmt::format("-T{}", options.threads), raw_file, "-o", zst}));
    HIPPO_ASSIGN_OR_RETURN(double d, run_zstd({"zstd", "-q", "-d", "-f", zst, "-o", "/dev/null"}));
    r.zstd_bytes = static_cast<std::int64_t>(fs::file_size(zst));
    if (rep >= 0) {
      compress_s.push_back(c);
      decompress_s.push_back(d);
    }
    if (rep == options.repetitions - 1) {
      // 1% more tokens on top of the last full snapshot.
      const std::int64_t grown = n_tokens + n_tokens / 100;
      if (grown <= state.max_tokens) {
        HIPPO_ASSIGN_OR_RETURN(writer, storage::KvSnapshotWriter::open(db, store_options));
        const auto start = Clock::now();
        auto submitted = writer->submit(make_request(state, grown));
        HIPPO_RETURN_IF_ERROR(submitted.status());
        HIPPO_ASSIGN_OR_RETURN(auto incremental, submitted->get());
        r.incremental_s = std::chrono::duration<double>(Clock::now() - start).count();
        r.incremental_bytes = incremental.written_stored_bytes;
        r.incremental_stream_bytes = incremental.written_stored_bytes - incremental.frontier_stored_bytes;
      }
      r.raw_bytes = stats->raw_bytes;
      r.stored_bytes = stats->written_stored_bytes;
      r.stream_stored_bytes = stats->written_stored_bytes - stats->frontier_stored_bytes;
    }
  }
  remove_db(db);
  fs::remove(raw_file);
  fs::remove(raw_file + ".zst");
  r.snapshot_s = spread_of(snapshot_s);
  r.checkpoint_s = spread_of(checkpoint_s);
  r.restore_s = spread_of(restore_s);
  r.zstd_compress_s = spread_of(compress_s);
  r.zstd_decompress_s = spread_of(decompress_s);
  return r;
}

// Compression ratio of each stream through the codec alone, with and without the byte-plane filter.
struct FilterResult {
  std::string name;
  double ratio_none = 0, ratio_byte_plane = 0;
};

Result<std::vector<FilterResult>> bench_filters(const SyntheticKvState& state, std::int64_t n_tokens, int level) {
  std::vector<FilterResult> out;
  storage::ChunkEncoder encoder;
  std::vector<std::byte> compressed;
  for (const auto& s : state.streams) {
    FilterResult f{s.name};
    const auto bytes = s.prefix(n_tokens);
    const std::size_t chunk = storage::kChunkTargetBytes / s.entry_bytes * s.entry_bytes;
    for (storage::Filter filter : {storage::Filter::kNone, storage::Filter::kBytePlane}) {
      std::int64_t stored = 0;
      for (std::size_t off = 0; off < bytes.size(); off += chunk) {
        const auto part = bytes.subspan(off, std::min(chunk, bytes.size() - off));
        HIPPO_ASSIGN_OR_RETURN(auto encoded, encoder.encode(part, s.entry_bytes, filter, level, compressed));
        stored += static_cast<std::int64_t>(encoded.codec == storage::Codec::kStored ? part.size() : compressed.size());
      }
      const double ratio = static_cast<double>(bytes.size()) / static_cast<double>(std::max<std::int64_t>(1, stored));
      (filter == storage::Filter::kNone ? f.ratio_none : f.ratio_byte_plane) = ratio;
    }
    out.push_back(f);
  }
  return out;
}

double mb_per_s(std::int64_t bytes, double seconds) { return seconds > 0 ? static_cast<double>(bytes) / seconds / 1e6 : 0; }

Status run_storage_bench(const StorageBenchOptions& options, std::ostream& out) {
  std::vector<std::int64_t> sizes;
  for (const auto& t : options.tokens) {
    HIPPO_ASSIGN_OR_RETURN(std::int64_t n, parse_token_count(t, "--tokens", "32K, 128K or 1M"));
    sizes.push_back(n);
  }
  if (options.level < 1 || options.level > 19)
    return make_error(ErrorCode::kInvalidArgument, "--level {} is outside 1..19", options.level);
  const std::int64_t max_tokens = *std::max_element(sizes.begin(), sizes.end());
  fs::path dir = options.dir;
  const bool own_dir = dir.empty();
  if (own_dir) {
    std::random_device device;
    dir = fs::temp_directory_path() / fmt::format("hippo-bench-storage-{:08x}", device());
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return make_error(ErrorCode::kIoError, "bench storage: cannot create {}: {}", dir.string(), ec.message());

  const auto generate_start = Clock::now();
  const SyntheticKvState state = make_synthetic_kv_state(max_tokens + max_tokens / 100, std::max(1, options.threads));
  const double generate_s = std::chrono::duration<double>(Clock::now() - generate_start).count();

  std::vector<SizeResult> results;
  for (std::int64_t n : sizes) {
    auto r = bench_size(state, n, options, dir);
    if (!r.ok()) {
      if (own_dir) fs::remove_all(dir, ec);
      return r.status();
    }
    results.push_back(std::move(r).value());
  }
  HIPPO_ASSIGN_OR_RETURN(auto filters, bench_filters(state, std::min<std::int64_t>(max_tokens, 128 * 1024), options.level));
  if (own_dir) fs::remove_all(dir, ec);

  if (options.json) {
    boost::json::array sizes_json;
    for (const auto& r : results) {
      boost::json::object streams;
      for (const auto& s : r.snapshot.streams)
        streams[s.name] = static_cast<double>(s.raw_bytes) / static_cast<double>(std::max<std::int64_t>(1, s.stored_bytes));
      auto spread_json = [](const Spread& s) { return boost::json::object{{"median", s.median}, {"min", s.min}, {"max", s.max}}; };
      sizes_json.push_back(boost::json::object{
          {"n_tokens", r.n_tokens},
          {"raw_bytes", r.raw_bytes},
          {"stored_bytes", r.stored_bytes},
          {"zstd_bytes", r.zstd_bytes},
          {"snapshot_s", spread_json(r.snapshot_s)},
          {"checkpoint_s", spread_json(r.checkpoint_s)},
          {"restore_s", spread_json(r.restore_s)},
          {"zstd_compress_s", spread_json(r.zstd_compress_s)},
          {"zstd_decompress_s", spread_json(r.zstd_decompress_s)},
          {"snapshot_vs_zstd", r.zstd_compress_s.median / r.snapshot_s.median},
          {"snapshot_with_checkpoint_vs_zstd",
           r.zstd_compress_s.median / (r.snapshot_s.median + r.checkpoint_s.median)},
          {"restore_vs_zstd", r.zstd_decompress_s.median / r.restore_s.median},
          {"incremental_bytes", r.incremental_bytes},
          {"incremental_fraction", static_cast<double>(r.incremental_bytes) / static_cast<double>(r.stored_bytes)},
          {"incremental_stream_bytes", r.incremental_stream_bytes},
          {"incremental_stream_fraction",
           static_cast<double>(r.incremental_stream_bytes) / static_cast<double>(r.stream_stored_bytes)},
          {"incremental_s", r.incremental_s},
          {"peak_extra_snapshot_bytes", r.peak_snapshot},
          {"peak_extra_restore_bytes", r.peak_restore},
          {"stream_ratios", std::move(streams)}});
    }
    boost::json::object filters_json;
    for (const auto& f : filters)
      filters_json[f.name] = boost::json::object{{"none", f.ratio_none}, {"byte_plane", f.ratio_byte_plane}};
    boost::json::object doc{{"level", options.level},         {"threads", options.threads},
                            {"repetitions", options.repetitions}, {"generate_s", generate_s},
                            {"sizes", std::move(sizes_json)},   {"filters", std::move(filters_json)}};
    out << boost::json::serialize(doc) << "\n";
    return {};
  }

  out << fmt::format("synthetic small-fullkv state, {} B/token; zstd level {}, {} codec threads (zstd -T{}); "
                     "median of {} runs after one warm-up (min..max); ckpt = WAL checkpoint after the snapshot is "
                     "durable; incr = bytes written by a snapshot after 1% more tokens, of the full snapshot's "
                     "(streams: without the ~3.4 MB frontier every snapshot rewrites)\n\n",
                     kSyntheticBytesPerToken, options.level, options.threads, options.threads, options.repetitions);
  out << fmt::format("{:>8} {:>9} {:>9} {:>6} | {:>22} {:>8} {:>6} {:>7} | {:>22} {:>9} {:>6} | {:>7} {:>9} | {:>9} {:>9}\n",
                     "tokens", "raw MB", "stored MB", "ratio", "snapshot s", "zstd s", "vs", "ckpt s", "restore s",
                     "zstd -d s", "vs", "incr %", "streams %", "peak snap", "peak rest");
  for (const auto& r : results) {
    out << fmt::format(
        "{:>8} {:>9.1f} {:>9.1f} {:>6.3f} | {:>7.3f} ({:.3f}..{:.3f}) {:>8.3f} {:>6.2f} {:>7.3f} | {:>7.3f} ({:.3f}..{:.3f}) "
        "{:>9.3f} {:>6.2f} | {:>7.2f} {:>9.2f} | {:>6.1f} MB {:>6.1f} MB\n",
        r.n_tokens, static_cast<double>(r.raw_bytes) / 1e6, static_cast<double>(r.stored_bytes) / 1e6,
        static_cast<double>(r.raw_bytes) / static_cast<double>(r.stored_bytes), r.snapshot_s.median, r.snapshot_s.min,
        r.snapshot_s.max, r.zstd_compress_s.median, r.zstd_compress_s.median / r.snapshot_s.median,
        r.checkpoint_s.median, r.restore_s.median,
        r.restore_s.min, r.restore_s.max, r.zstd_decompress_s.median, r.zstd_decompress_s.median / r.restore_s.median,
        100.0 * static_cast<double>(r.incremental_bytes) / static_cast<double>(r.stored_bytes),
        100.0 * static_cast<double>(r.incremental_stream_bytes) / static_cast<double>(r.stream_stored_bytes),
        static_cast<double>(r.peak_snapshot) / 1e6, static_cast<double>(r.peak_restore) / 1e6);
  }
  const SizeResult& largest = results.back();
  out << fmt::format("\nthroughput at {} tokens: snapshot {:.0f} MB/s (zstd {:.0f}), restore {:.0f} MB/s (zstd -d {:.0f}); "
                     "zstd CLI output {:.1f} MB\n",
                     largest.n_tokens, mb_per_s(largest.raw_bytes, largest.snapshot_s.median),
                     mb_per_s(largest.raw_bytes, largest.zstd_compress_s.median),
                     mb_per_s(largest.raw_bytes, largest.restore_s.median),
                     mb_per_s(largest.raw_bytes, largest.zstd_decompress_s.median),
                     static_cast<double>(largest.zstd_bytes) / 1e6);
  out << fmt::format("\ncompression ratio per stream (codec alone, {} tokens):\n{:<16} {:>8} {:>11}\n",
                     std::min<std::int64_t>(max_tokens, 128 * 1024), "stream", "no filter", "byte-plane");
  for (const auto& f : filters) out << fmt::format("{:<16} {:>8.3f} {:>11.3f}\n", f.name, f.ratio_none, f.ratio_byte_plane);
  out << fmt::format("\nstate generated in {:.1f} s\n", generate_s);
  return {};
}

}  // namespace

void add_storage_bench(CLI::App& bench, Invocation& inv) {
  auto options = std::make_shared<StorageBenchOptions>();
  CLI::App* storage = bench.add_subcommand("storage", "Snapshot and restore throughput against the zstd command");
  storage->add_option("--tokens", options->tokens, "Session sizes in tokens (32K, 128K, 1M)")
      ->delimiter(',')
      ->capture_default_str();
  storage->add_option("--level", options->level, "zstd level, for hippo and the zstd command alike")->capture_default_str();
  storage->add_option("--threads", options->threads, "Codec threads (and zstd -T)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  storage->add_option("--repetitions", options->repetitions, "Timed runs after one warm-up")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  storage->add_option("--dir", options->dir, "Work directory for the database and zstd files (default: a temp dir)");
  storage->add_flag("--json", options->json, "One JSON object instead of tables");
  storage->parse_complete_callback([&inv, options] {
    inv.action = [&inv, options] { return run_storage_bench(*options, *inv.out); };
  });
}

}  // namespace hippo::cli
