// Where a setting's value comes from, in order of precedence (docs/ARCHITECTURE.md, "Configuration"):
//
//   1. a command-line flag          hippo serve --port 8080
//   2. a HIPPO_* environment variable  HIPPO_PORT=8080          (name: HIPPO_ + upper-cased flag, '-' -> '_')
//   3. the config file              --config hippo.toml / HIPPO_CONFIG, TOML: `port = 8080`, or scoped
//                                   to one command under `[serve]`
//   4. the built-in default
//
// CLI11 applies (1) and (2) while parsing; apply_config_file() then fills the options still unset
// from (3). Every long option of every command takes part; nothing needs registering twice.
#pragma once

#include "base/status.h"

#include <CLI/CLI.hpp>

#include <string>

namespace hippo::cli {

// The environment variable that sets a long option: "kv-memory" -> "HIPPO_KV_MEMORY".
std::string env_name_for(std::string_view long_name);

// Gives every long option of app and its subcommands its HIPPO_* environment variable.
void bind_environment(CLI::App& app);

// Reads the config file and sets every option of the parsed commands that neither a flag nor the
// environment set. A key that names no option of any command, or a value that does not convert,
// is an error naming the file and the key.
Status apply_config_file(CLI::App& app, const std::string& path);

}  // namespace hippo::cli
