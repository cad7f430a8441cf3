// The config-file layer on top of CLI11's flag and environment handling.
#include "api/cli/config_layers.h"

#include <algorithm>
#include <cctype>
#include <fstream>

namespace hippo::cli {
namespace {

// The commands a config key may address: the root and each subcommand, by its path of names.
void collect_commands(CLI::App& app, std::vector<std::string>& path,
                      std::vector<std::pair<std::vector<std::string>, CLI::App*>>& out) {
  out.emplace_back(path, &app);
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    path.push_back(sub->get_name());
    collect_commands(*sub, path, out);
    path.pop_back();
  }
}

CLI::Option* find_long_option(CLI::App& app, const std::string& name) {
  for (CLI::Option* opt : app.get_options()) {
    const auto& names = opt->get_lnames();
    if (std::find(names.begin(), names.end(), name) != names.end()) return opt;
  }
  return nullptr;
}

// A command takes part when it was selected on the command line (or is the root).
bool was_parsed(CLI::App& app) { return app.get_parent() == nullptr || app.parsed(); }

}  // namespace

std::string env_name_for(std::string_view long_name) {
  std::string env = "HIPPO_";
  for (char c : long_name) env += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return env;
}

void bind_environment(CLI::App& app) {
  for (CLI::Option* opt : app.get_options()) {
    // --help and --version are actions, not settings: HIPPO_VERSION=1 must not print and exit.
    if (opt->get_lnames().empty() || opt == app.get_help_ptr() || opt == app.get_version_ptr()) continue;
    if (opt->get_envname().empty()) opt->envname(env_name_for(opt->get_lnames().front()));
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) bind_environment(*sub);
}

Status apply_config_file(CLI::App& app, const std::string& path) {
  std::ifstream input(path);
  if (!input.good()) return make_error(ErrorCode::kNotFound, "config file {}: cannot be opened", path);
  std::vector<CLI::ConfigItem> items;
  try {
    items = CLI::ConfigTOML().from_config(input);
  } catch (const CLI::Error& e) {
    return make_error(ErrorCode::kInvalidArgument, "config file {}: {}", path, e.what());
  }

  std::vector<std::pair<std::vector<std::string>, CLI::App*>> commands;
  std::vector<std::string> root_path;
  collect_commands(app, root_path, commands);

  for (const CLI::ConfigItem& item : items) {
    if (item.name == "++" || item.name == "--") continue;  // section markers
    const std::string key = item.fullname();
    bool known = false;
    for (auto& [command_path, command] : commands) {
      // A flat key applies to every command that has the option; a [section] key to that command.
      if (!item.parents.empty() && item.parents != command_path) continue;
      CLI::Option* opt = find_long_option(*command, item.name);
      if (!opt) continue;
      known = true;
      if (!was_parsed(*command) || opt->count() > 0) continue;  // a flag or HIPPO_* already set it
      try {
        opt->add_result(item.inputs);
        opt->run_callback();
      } catch (const CLI::Error& e) {
        return make_error(ErrorCode::kInvalidArgument, "config file {}: key '{}': {}", path, key, e.what());
      }
    }
    if (!known) return make_error(ErrorCode::kInvalidArgument, "config file {}: unknown setting '{}'", path, key);
  }
  return {};
}

}  // namespace hippo::cli
