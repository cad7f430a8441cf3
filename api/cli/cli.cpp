// Builds the command tree, and runs one command line from parsing to exit code.
#include "api/cli/cli.h"

#include "api/cli/config_layers.h"
#include "base/log.h"
#include "base/version.h"
#include "engine/model/model.h"
#include "engine/speculative/session_drafter.h"
#include "kernels/backend_registry.h"
#include "kernels/cpu/isa.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <ostream>

namespace hippo::cli {

int exit_code_for(const Status& status) {
  switch (status.code()) {
    case ErrorCode::kOk: return 0;
    case ErrorCode::kInvalidArgument: return kExitUsage;
    case ErrorCode::kUnavailable: return kExitUnavailable;
    default: return kExitFailure;
  }
}

CLI::Option* add_backend_option(CLI::App& command, std::string& backend) {
  const std::vector<std::string> names = kernels::backend_names();
  auto known = [names](const std::string& value) -> std::string {
    if (kernels::is_backend_name(value)) return {};
    return fmt::format("unknown backend '{}' (this build has: {})", value, fmt::join(names, ", "));
  };
  return command
      .add_option("--backend,--device", backend,
                  fmt::format("Backend that runs the model's ops: {} (ref: the scalar reference ops, slow, for checks; a GPU "
                              "backend takes a device as NAME:N, e.g. --device cuda:0)",
                              fmt::join(names, ", ")))
      ->check(CLI::Validator(known, "BACKEND"))
      ->capture_default_str();
}

CLI::Option* add_engine_threads_option(CLI::App& command, int& threads) {
  return command.add_option("--threads", threads, "Engine compute threads (0 = one per logical CPU)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
}

CLI::Option* add_speculative_option(CLI::App& command, std::string& mode) {
  return command
      .add_option("--speculative", mode,
                  "Speculative decoding, output unchanged: off, context (drafts what followed the latest earlier "
                  "occurrence of the text's end in the session, verified by the model), dspark (the checkpoint's "
                  "DSpark draft stages), auto (per step whichever of both, or none, promises the most tokens for its "
                  "measured cost; context alone without DSpark stages)")
      ->check(CLI::IsMember({"off", "context", "dspark", "auto"}))
      ->capture_default_str();
}

Result<std::optional<engine::DraftMode>> draft_mode(const std::string& mode, const engine::Model& model) {
  if (mode == "off") return std::optional<engine::DraftMode>();
  if (mode == "context") return std::optional(engine::DraftMode::kContext);
  if (mode == "auto") return std::optional(engine::DraftMode::kAuto);
  if (!model.has_dspark()) {
    return make_error(ErrorCode::kInvalidArgument,
                      "--speculative dspark: the checkpoint has no DSpark stages (text_config.num_nextn_predict_layers "
                      "is 0); use --speculative context or auto");
  }
  return std::optional(engine::DraftMode::kDspark);
}

CLI::App* add_unbuilt_command(CLI::App& parent, const std::string& name, const std::string& description,
                              const std::string& what, Invocation& invocation) {
  CLI::App* sub = parent.add_subcommand(name, description + " [not built yet]");
  std::string full_name = parent.get_parent() ? parent.get_name() + " " + name : name;
  // Its future flags must not turn "not built yet" into a parse error: take every argument as is.
  sub->fallthrough(false)->prefix_command();
  sub->parse_complete_callback([&invocation, full_name, what] {
    invocation.action = [full_name, what] {
      return make_error(ErrorCode::kUnavailable, "hippo {}: not built yet ({})", full_name, what);
    };
  });
  return sub;
}

std::unique_ptr<CLI::App> build_app(Invocation& inv) {
  auto app = std::make_unique<CLI::App>(
      "hippo: a self-hosted runtime host for long-lived LLM agents (DeepSeek-V4.1-Flash).", "hippo");
  app->set_version_flag("--version", fmt::format("hippo {} ({})", kVersion, kGitRevision));
  app->require_subcommand(1);
  app->fallthrough();  // global options may follow the subcommand: `hippo serve --log-level debug`
  app->add_option("--config", inv.config_path, "TOML config file (flags > HIPPO_* env > this file > defaults)");
  app->add_option("--log-level", inv.log_level, "trace, debug, info, warn, error or off")->capture_default_str();
  app->add_option("--log-format", inv.log_format, "text (logfmt fields) or json")->capture_default_str();
  app->add_option("--cpu-isa", inv.cpu_isa,
                  "Cap the CPU kernels' instruction set: avx512vbmi, avx512, avx2 or generic (default: the best "
                  "this CPU runs), e.g. to run the AVX2 path on an AVX-512 machine");

  add_serve_command(*app, inv);
  add_chat_command(*app, inv);
  add_run_command(*app, inv);
  add_session_commands(*app, inv);
  add_model_commands(*app, inv);
  add_key_commands(*app, inv);
  add_bench_commands(*app, inv);
  bind_environment(*app);
  return app;
}

int run(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  Invocation inv;
  inv.out = &out;
  auto app = build_app(inv);
  try {
    app->parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version arrive here too, with exit code 0.
    if (e.get_exit_code() != 0 && app->get_subcommands().empty() && argc > 1 && argv[argc - 1][0] != '-') {
      err << "hippo: unknown command '" << argv[argc - 1] << "' (hippo --help lists them)\n";
      return kExitUsage;
    }
    int code = app->exit(e, out, err);
    return code == 0 ? 0 : kExitUsage;
  }

  if (!inv.config_path.empty()) {
    Status status = apply_config_file(*app, inv.config_path);
    if (!status.ok()) {
      err << "hippo: " << status.message() << "\n";
      return exit_code_for(status);
    }
  }
  auto level = log::parse_level(inv.log_level);
  auto format = log::parse_format(inv.log_format);
  for (const Status& s : {level.status(), format.status()}) {
    if (!s.ok()) {
      err << "hippo: " << s.message() << "\n";
      return kExitUsage;
    }
  }
  log::init({*level, *format});
  if (!inv.cpu_isa.empty()) {
    if (Status s = kernels::cpu::limit_isa(inv.cpu_isa); !s.ok()) {
      err << "hippo: --cpu-isa: " << s.message() << "\n";
      return exit_code_for(s);
    }
  }

  if (!inv.action) {  // a command family given without its subcommand is caught by CLI11; keep it so
    err << "hippo: bug: no action for this command line\n";
    return kExitFailure;
  }
  Status status = inv.action();
  if (!status.ok()) {
    err << "hippo: " << status.message() << "\n";
    return exit_code_for(status);
  }
  return 0;
}

}  // namespace hippo::cli
