// Session administration over HTTP (docs/protocol.md, "Sessions"), for the caller's tenant only:
//   GET    /v1/sessions                 the tenant's sessions
//   GET    /v1/sessions/{id}            one session
//   DELETE /v1/sessions/{id}            close it (its row and log stay in the database)
//   POST   /v1/sessions/{id}/snapshot   snapshot it now (durable when answered)
//   POST   /v1/sessions/{id}/fork       a new session of the tenant, an exact copy (201)
// JSON only here; http_session.cpp does the I/O, and routes requests here by is_session_admin_path()
// (http_routes.h).
#pragma once

#include "api/server/auth.h"
#include "api/server/server_context.h"

#include <boost/beast/http/verb.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace hippo::server::admin {

struct Answer {
  unsigned status = 200;
  std::string body;                 // JSON: a session, a list, or an OpenAI-style error
  int64_t retry_after_seconds = 0;  // > 0: send Retry-After
};

// target: a path for which is_session_admin_path() holds. Runs on a runtime-call thread: it blocks
// on the runtime.
// target: the path; query: what followed its '?' (empty: none).
Answer handle(ServerContext& ctx, const Tenant& tenant, boost::beast::http::verb method, std::string_view target,
              std::string_view query);

}  // namespace hippo::server::admin
