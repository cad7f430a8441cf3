// The `hippo` command line: one CLI11 tree, one file per subcommand family (docs/ARCHITECTURE.md,
// "Adding a subcommand"). Parsing fills an Invocation; running it is separate, so tests can parse
// any command line without side effects.
#pragma once

#include "base/status.h"

#include <CLI/CLI.hpp>

#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>

namespace hippo::engine {
class Model;
enum class DraftMode;
}  // namespace hippo::engine

namespace hippo::cli {

// Exit codes: 0 success; 1 the command failed; 2 the command line or a setting is wrong;
// 69 (EX_UNAVAILABLE) the subcommand is not built yet.
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitUnavailable = 69;

int exit_code_for(const Status& status);

struct Invocation {
  std::string config_path;          // --config / HIPPO_CONFIG
  std::string log_level = "info";   // --log-level / HIPPO_LOG_LEVEL
  std::string log_format = "text";  // --log-format / HIPPO_LOG_FORMAT
  std::string cpu_isa;              // --cpu-isa / HIPPO_CPU_ISA: the CPU kernels' instruction set cap
  std::ostream* out = nullptr;      // command output (results, tables, JSON); logs go to stderr
  std::function<Status()> action;   // set by the selected subcommand's parse callback
};

std::unique_ptr<CLI::App> build_app(Invocation& invocation);

// Parses, applies the config file, sets up logging and runs the selected command. Returns the
// process exit code; messages for people go to err.
int run(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

// Subcommand families, each in its own file.
void add_bench_commands(CLI::App& app, Invocation& invocation);
void add_bench_tokenizer_command(CLI::App& bench, Invocation& invocation);  // bench_tokenizer.cpp
void add_storage_bench(CLI::App& bench, Invocation& invocation);            // `hippo bench storage`
void add_bench_model_command(CLI::App& bench, Invocation& invocation);      // bench_model.cpp
void add_bench_speculative_command(CLI::App& bench, Invocation& invocation);  // bench_speculative.cpp
void add_bench_kernels_command(CLI::App& bench, Invocation& invocation);    // bench_kernels.cpp
void add_bench_agents_command(CLI::App& bench, Invocation& invocation);     // bench_agents.cpp
void add_bench_server_command(CLI::App& bench, Invocation& invocation);     // bench_server.cpp
void add_model_commands(CLI::App& app, Invocation& invocation);
void add_model_render_command(CLI::App& model, Invocation& invocation);  // `hippo model render`
void add_run_command(CLI::App& app, Invocation& invocation);  // `hippo run`
void add_session_commands(CLI::App& app, Invocation& invocation);
void add_serve_command(CLI::App& app, Invocation& invocation);  // `hippo serve` (serve_command.cpp)
void add_key_commands(CLI::App& app, Invocation& invocation);   // `hippo key` (key_commands.cpp)
void add_chat_command(CLI::App& app, Invocation& invocation);   // `hippo chat` (chat_command.cpp)

// --backend on a command that loads a model: a name kernels/backend_registry.h knows, or its GPU
// backend with a device ("cuda:1"). Load reports a GPU that is missing.
CLI::Option* add_backend_option(CLI::App& command, std::string& backend);

// --threads on a command that runs the engine: its compute threads, 0 = one per logical CPU.
CLI::Option* add_engine_threads_option(CLI::App& command, int& threads);

// --speculative on a command that decodes: off; context (drafts from the session's own tokens);
// dspark (the checkpoint's draft stages); auto (per step the better of both, or none, for its cost;
// engine/speculative/session_drafter.h).
CLI::Option* add_speculative_option(CLI::App& command, std::string& mode);
// The drafter of a mode (none: off); dspark on a checkpoint without DSpark stages is refused.
Result<std::optional<engine::DraftMode>> draft_mode(const std::string& mode, const engine::Model& model);

// Registers a subcommand that exists in the interface but not yet in the code: running it says
// so and exits with kExitUnavailable. `what` names the missing piece.
CLI::App* add_unbuilt_command(CLI::App& parent, const std::string& name, const std::string& description,
                              const std::string& what, Invocation& invocation);

}  // namespace hippo::cli
