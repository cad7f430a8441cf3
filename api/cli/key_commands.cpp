// `hippo key create|list|revoke|limits`: API keys and tenants' limits in the session database
// (docs/protocol.md, "Authentication"). A key is printed once, by `create`; the database keeps only
// its SHA-256, so no command can show it again. Like `hippo session`, these commands work while a
// server holds the database open; a running server sees a revoked key or new limits within its
// auth cache's 5 s.
#include "api/cli/cli.h"
#include "api/cli/clock.h"
#include "storage/store.h"

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <fmt/format.h>

#include <charconv>
#include <iostream>
#include <memory>
#include <ostream>

namespace hippo::cli {
namespace {

using storage::SessionStore;

struct KeyOptions {
  std::string db = "hippo.db";
  int busy_timeout_ms = 5000;
  bool json = false;
  std::string tenant;
  std::string label;
  std::string max_sessions;       // "": unchanged; "default": the server's; else a number (0: no limit)
  std::string tokens_per_minute;  // likewise
  std::string max_prompt_tokens;  // likewise
  int64_t id = 0;
};

Result<std::unique_ptr<SessionStore>> open_store(const KeyOptions& options, bool write) {
  storage::StoreOptions store_options;
  store_options.read_only = !write;
  store_options.busy_timeout_ms = options.busy_timeout_ms;
  auto store = SessionStore::open(options.db, store_options);
  if (!store.ok() && store.status().code() == ErrorCode::kNotFound)
    return make_error(ErrorCode::kNotFound, "no session database at {} (set --db or HIPPO_DB)", options.db);
  return store;
}

// Applies one limit flag: "" leaves it, "default" clears it (the server's default), N sets it.
Status apply_limit(std::string_view flag, const std::string& text, std::optional<std::int64_t>& limit) {
  if (text.empty()) return {};
  if (text == "default") {
    limit.reset();
    return {};
  }
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 0)
    return make_error(ErrorCode::kInvalidArgument, "{} must be a number >= 0 (0: no limit) or 'default', not '{}'", flag,
                      text);
  limit = value;
  return {};
}

bool has_limit_flags(const KeyOptions& o) {
  return !o.max_sessions.empty() || !o.tokens_per_minute.empty() || !o.max_prompt_tokens.empty();
}

Result<storage::TenantLimits> updated_limits(const KeyOptions& o, storage::TenantLimits limits) {
  HIPPO_RETURN_IF_ERROR(apply_limit("--max-sessions", o.max_sessions, limits.max_sessions));
  HIPPO_RETURN_IF_ERROR(apply_limit("--tokens-per-minute", o.tokens_per_minute, limits.tokens_per_minute));
  HIPPO_RETURN_IF_ERROR(apply_limit("--max-prompt-tokens", o.max_prompt_tokens, limits.max_prompt_tokens));
  return limits;
}

std::string limit_text(const std::optional<std::int64_t>& limit) {
  if (!limit) return "default";
  return *limit == 0 ? "unlimited" : std::to_string(*limit);
}

boost::json::value limit_json(const std::optional<std::int64_t>& limit) {
  return limit ? boost::json::value(*limit) : boost::json::value(nullptr);
}

Status run_create(const KeyOptions& options, std::ostream& out) {
  // Flags first: a typo must not leave a tenant or a key behind.
  HIPPO_RETURN_IF_ERROR(updated_limits(options, {}).status());
  HIPPO_ASSIGN_OR_RETURN(auto store, open_store(options, true));
  HIPPO_ASSIGN_OR_RETURN(storage::TenantInfo tenant, store->ensure_tenant(options.tenant));
  if (has_limit_flags(options)) {
    HIPPO_ASSIGN_OR_RETURN(tenant.limits, updated_limits(options, tenant.limits));
    HIPPO_RETURN_IF_ERROR(store->set_tenant_limits(tenant.id, tenant.limits));
  }
  HIPPO_ASSIGN_OR_RETURN(std::string key, storage::new_api_key());
  HIPPO_ASSIGN_OR_RETURN(std::int64_t id, store->add_api_key(tenant.id, key, options.label));
  if (options.json) {
    out << boost::json::serialize(boost::json::object{
               {"id", id}, {"tenant", tenant.name}, {"tenant_id", tenant.id}, {"label", options.label}, {"key", key}})
        << "\n";
  } else {
    out << key << "\n";
  }
  out.flush();
  std::cerr << fmt::format("hippo: API key {} for tenant {} created. It is not shown again: keep it now.\n", id,
                           tenant.name);
  return {};
}

Status run_list(const KeyOptions& options, std::ostream& out) {
  HIPPO_ASSIGN_OR_RETURN(auto store, open_store(options, false));
  HIPPO_ASSIGN_OR_RETURN(auto keys, store->list_api_keys());
  if (options.json) {
    boost::json::array rows;
    for (const auto& k : keys) {
      boost::json::object o{{"id", k.id},           {"tenant", k.tenant}, {"tenant_id", k.tenant_id},
                            {"label", k.label},     {"created_at", k.created_at}};
      o["revoked_at"] = k.revoked_at ? boost::json::value(*k.revoked_at) : boost::json::value(nullptr);
      rows.push_back(std::move(o));
    }
    out << boost::json::serialize(rows) << "\n";
    return {};
  }
  out << fmt::format("{:>4}  {:<16} {:<20} {:<20}  {}\n", "ID", "TENANT", "LABEL", "CREATED", "REVOKED");
  for (const auto& k : keys) {
    out << fmt::format("{:>4}  {:<16} {:<20} {:<20}  {}\n", k.id, k.tenant, k.label, format_time(k.created_at),
                       k.revoked_at ? format_time(*k.revoked_at) : "-");
  }
  return {};
}

Status run_revoke(const KeyOptions& options, std::ostream& out) {
  HIPPO_ASSIGN_OR_RETURN(auto store, open_store(options, true));
  HIPPO_RETURN_IF_ERROR(store->revoke_api_key(options.id));
  if (options.json)
    out << boost::json::serialize(boost::json::object{{"revoked", options.id}}) << "\n";
  else
    out << fmt::format("revoked API key {} (a running server refuses it within 5 s)\n", options.id);
  return {};
}

Status run_limits(const KeyOptions& options, std::ostream& out) {
  HIPPO_RETURN_IF_ERROR(updated_limits(options, {}).status());
  HIPPO_ASSIGN_OR_RETURN(auto store, open_store(options, has_limit_flags(options)));
  HIPPO_ASSIGN_OR_RETURN(std::optional<storage::TenantInfo> found, store->find_tenant(options.tenant));
  if (!found) {
    return make_error(ErrorCode::kNotFound, "tenant {}: no such tenant in {} (`hippo key create --tenant {}` makes it)",
                      options.tenant, options.db, options.tenant);
  }
  storage::TenantInfo tenant = *found;
  if (has_limit_flags(options)) {
    HIPPO_ASSIGN_OR_RETURN(tenant.limits, updated_limits(options, tenant.limits));
    HIPPO_RETURN_IF_ERROR(store->set_tenant_limits(tenant.id, tenant.limits));
  }
  if (options.json) {
    out << boost::json::serialize(boost::json::object{{"tenant", tenant.name},
                                                      {"tenant_id", tenant.id},
                                                      {"max_sessions", limit_json(tenant.limits.max_sessions)},
                                                      {"tokens_per_minute", limit_json(tenant.limits.tokens_per_minute)},
                                                      {"max_prompt_tokens", limit_json(tenant.limits.max_prompt_tokens)}})
        << "\n";
  } else {
    out << fmt::format("tenant {}: max sessions {}, tokens per minute {}, max prompt tokens {}\n", tenant.name,
                       limit_text(tenant.limits.max_sessions), limit_text(tenant.limits.tokens_per_minute),
                       limit_text(tenant.limits.max_prompt_tokens));
  }
  return {};
}

}  // namespace

void add_key_commands(CLI::App& app, Invocation& inv) {
  CLI::App* family = app.add_subcommand("key", "Manage API keys and tenants' limits");
  family->require_subcommand(1);

  using Runner = Status (*)(const KeyOptions&, std::ostream&);
  auto add = [&](const char* name, const char* description, Runner runner) {
    auto options = std::make_shared<KeyOptions>();
    CLI::App* sub = family->add_subcommand(name, description);
    sub->add_option("--db", options->db, "Session database")->capture_default_str();
    sub->add_flag("--json", options->json, "Machine-readable JSON on stdout");
    sub->add_option("--busy-timeout", options->busy_timeout_ms, "Milliseconds to wait while another process writes")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    sub->parse_complete_callback([&inv, options, runner] {
      inv.action = [&inv, options, runner] { return runner(*options, *inv.out); };
    });
    return std::pair{sub, options};
  };
  auto add_limit_flags = [](CLI::App* sub, KeyOptions& o) {
    sub->add_option("--max-sessions", o.max_sessions,
                    "Open sessions the tenant may have: a number (0 = no limit) or 'default' (serve's "
                    "--tenant-max-sessions)");
    sub->add_option("--tokens-per-minute", o.tokens_per_minute,
                    "Input + output tokens per minute for the tenant: a number (0 = no limit) or 'default' (serve's "
                    "--tenant-tokens-per-minute)");
    sub->add_option("--max-prompt-tokens", o.max_prompt_tokens,
                    "Prompt tokens one request of the tenant may render to: a number (0 = no limit) or 'default' "
                    "(serve's --max-prompt-tokens)");
  };

  {
    auto [sub, o] = add("create", "Create an API key for a tenant (made if new); prints the key once", run_create);
    sub->add_option("--tenant", o->tenant, "Tenant name")->required();
    sub->add_option("--label", o->label, "What the key is for (shown by `key list`)");
    add_limit_flags(sub, *o);
  }
  add("list", "List API keys (never the keys themselves)", run_list);
  {
    auto [sub, o] = add("revoke", "Revoke an API key by its id (`key list` shows ids)", run_revoke);
    sub->add_option("id", o->id, "Key id")->required()->check(CLI::PositiveNumber);
  }
  {
    auto [sub, o] = add("limits", "Show or set a tenant's limits", run_limits);
    sub->add_option("--tenant", o->tenant, "Tenant name")->required();
    add_limit_flags(sub, *o);
  }
}

}  // namespace hippo::cli
