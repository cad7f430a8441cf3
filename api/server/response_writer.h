// One response's events as an HTTP endpoint writes them: SSE while streaming, or one JSON body at
// the end. The chat completions and Responses endpoints each have one (openai_chat.h,
// openai_responses.h); http_session.cpp does the I/O for both.
#pragma once

#include "agents/agent_types.h"
#include "base/status.h"

#include <string>

namespace hippo::server {

class ResponseWriter {
 public:
  virtual ~ResponseWriter() = default;
  // Streaming: the SSE text the start of the response sends.
  virtual std::string stream_start() = 0;
  // Streaming: the SSE text an event sends (possibly none).
  virtual std::string stream_event(const agents::ResponseEvent& event) = 0;
  // Non-streaming: collects an event; after the last, body() is the whole response.
  virtual void add(const agents::ResponseEvent& event) = 0;
  virtual std::string body() const = 0;
  virtual bool failed() const = 0;
  virtual const Status& error() const = 0;
};

}  // namespace hippo::server
