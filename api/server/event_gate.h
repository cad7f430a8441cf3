// Orders a response's events after the answer to the request that created it. The runtime may call
// the sink (on its engine thread) before create_response() has returned to the thread that called
// it; the gate holds those events until open(), which first sends the answer ("response.created",
// or the SSE headers) and then the held events, all through one deliver function that only posts
// to the connection's strand, so the engine thread never waits on a connection.
#pragma once

#include "agents/agent_types.h"

#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace hippo::server {

class EventGate {
 public:
  using Deliver = std::function<void(const agents::ResponseEvent&)>;

  explicit EventGate(Deliver deliver) : deliver_(std::move(deliver)) {}

  // The sink the runtime calls.
  void push(const agents::ResponseEvent& event) {
    std::lock_guard lock(mutex_);
    if (open_) deliver_(event);
    else held_.push_back(event);
  }

  // Runs first (which posts the answer), then delivers what was held.
  void open(const std::function<void()>& first) {
    std::lock_guard lock(mutex_);
    first();
    for (const agents::ResponseEvent& e : held_) deliver_(e);
    held_.clear();
    open_ = true;
  }

  static agents::EventSink sink(const std::shared_ptr<EventGate>& gate) {
    return [gate](const agents::ResponseEvent& e) { gate->push(e); };
  }

 private:
  std::mutex mutex_;
  bool open_ = false;
  std::vector<agents::ResponseEvent> held_;
  Deliver deliver_;
};

}  // namespace hippo::server
