#include "api/server/session_streams.h"

#include <boost/json/serialize.hpp>

namespace hippo::server {

int64_t SessionStreams::publish(const std::string& session_id, boost::json::object event, Phase phase) {
  std::lock_guard lock(mutex_);
  Stream& s = streams_[session_id];
  if (phase == Phase::kStart) s.running = true;
  const int64_t seq = ++s.last_seq;
  if (phase == Phase::kEnd) {
    s.running = false;
    s.finished_through = seq;
  }
  event["session_seq"] = seq;
  const size_t bytes = boost::json::serialize(event).size();
  // Delivered under the lock: deliver only posts, and posting here keeps the connection's queue in
  // session_seq order against a concurrent attach().
  if (s.connection != 0) s.deliver(event, false);
  s.kept.push_back({s.last_seq, bytes, std::move(event)});
  s.kept_bytes += bytes;
  total_kept_bytes_ += bytes;
  while (s.kept_bytes > max_kept_bytes_ && !s.kept.empty()) {
    s.kept_bytes -= s.kept.front().bytes;
    total_kept_bytes_ -= s.kept.front().bytes;
    s.kept.pop_front();
  }
  return seq;
}

Result<int64_t> SessionStreams::attach(const std::string& session_id, uint64_t connection, Deliver deliver,
                                       std::optional<int64_t> after_seq,
                                       const std::function<void(int64_t)>& before_replay) {
  std::lock_guard lock(mutex_);
  Stream& s = streams_[session_id];
  if (after_seq) {
    if (*after_seq < 0 || *after_seq > s.last_seq)
      return make_error(ErrorCode::kInvalidArgument, "session {}: after_seq {} is not a session_seq of its stream (last {})",
                        session_id, *after_seq, s.last_seq);
    const int64_t oldest = s.kept.empty() ? s.last_seq + 1 : s.kept.front().seq;
    if (*after_seq + 1 < oldest)
      return make_error(ErrorCode::kInvalidArgument,
                        "session {}: events after session_seq {} are no longer kept (the oldest kept is {})", session_id,
                        *after_seq, oldest);
  }
  if (before_replay) before_replay(s.last_seq);
  if (after_seq) {
    for (const Kept& k : s.kept)
      if (k.seq > *after_seq) deliver(k.event, true);
  }
  s.connection = connection;
  s.deliver = std::move(deliver);
  return s.last_seq;
}

bool SessionStreams::detach(const std::string& session_id, uint64_t connection) {
  std::lock_guard lock(mutex_);
  auto it = streams_.find(session_id);
  if (it == streams_.end() || it->second.connection != connection) return false;
  it->second.connection = 0;
  it->second.deliver = nullptr;
  it->second.detached_at = Clock::now();
  return true;
}

bool SessionStreams::attached(const std::string& session_id) {
  std::lock_guard lock(mutex_);
  auto it = streams_.find(session_id);
  return it != streams_.end() && it->second.connection != 0;
}

std::optional<SessionStreams::Clock::duration> SessionStreams::unattached_for(const std::string& session_id) {
  std::lock_guard lock(mutex_);
  auto it = streams_.find(session_id);
  if (it == streams_.end() || !it->second.running || it->second.connection != 0) return std::nullopt;
  return Clock::now() - it->second.detached_at;
}

bool SessionStreams::trim_finished(const std::string& session_id, Clock::duration unread_for) {
  std::lock_guard lock(mutex_);
  auto it = streams_.find(session_id);
  if (it == streams_.end()) return false;
  Stream& s = it->second;
  if (s.connection != 0 || Clock::now() - s.detached_at < unread_for) return false;
  while (!s.kept.empty() && s.kept.front().seq <= s.finished_through) {
    s.kept_bytes -= s.kept.front().bytes;
    total_kept_bytes_ -= s.kept.front().bytes;
    s.kept.pop_front();
  }
  return true;
}

void SessionStreams::forget(const std::string& session_id) {
  std::lock_guard lock(mutex_);
  auto it = streams_.find(session_id);
  if (it == streams_.end()) return;
  total_kept_bytes_ -= it->second.kept_bytes;
  streams_.erase(it);
}

size_t SessionStreams::kept_bytes() {
  std::lock_guard lock(mutex_);
  return total_kept_bytes_;
}

}  // namespace hippo::server
