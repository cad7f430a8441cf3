// Each session's response events as a numbered stream that outlives the connection reading it.
// Every event a session's responses produce gets the session's next `session_seq` and is kept in
// a bounded replay buffer; one connection at a time is attached and receives them as they come. A
// client whose connection dropped reconnects, sends session.resume with the last session_seq it
// saw, and gets what it missed and then the live events, in order, without gaps or repeats.
//
// Thread-safe. publish() runs on the engine's thread (through the response's sink); deliver
// functions only post to their connection's strand, so nothing here waits on a socket.
#pragma once

#include "base/status.h"

#include <boost/json/object.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace hippo::server {

class SessionStreams {
 public:
  // replay: the event is one of the kept ones that attach() sends again, not a new one.
  using Deliver = std::function<void(boost::json::object event, bool replay)>;
  using Clock = std::chrono::steady_clock;
  // Where an event stands in its response: the first (response.created), the last (completed or
  // failed), or between.
  enum class Phase { kStart, kDuring, kEnd };

  // max_kept_bytes: the replay buffer of one session (serialised JSON bytes); the oldest events go
  // first when it is full.
  explicit SessionStreams(size_t max_kept_bytes) : max_kept_bytes_(max_kept_bytes) {}

  // Numbers the event (its "session_seq" field), keeps it, and hands it to the attached connection.
  // Returns the number.
  int64_t publish(const std::string& session_id, boost::json::object event, Phase phase = Phase::kDuring);

  // Attaches a connection, replacing any other. before_replay(last session_seq) runs first (the
  // caller posts its answer there, so that it precedes the replay), then the kept events after
  // after_seq are delivered (nullopt: live events only). kInvalidArgument when after_seq is not a
  // seq of the stream or events after it are no longer kept; nothing is attached then.
  Result<int64_t> attach(const std::string& session_id, uint64_t connection, Deliver deliver,
                         std::optional<int64_t> after_seq, const std::function<void(int64_t)>& before_replay = {});
  // Detaches the connection if it is the one attached. Returns whether it was.
  bool detach(const std::string& session_id, uint64_t connection);
  bool attached(const std::string& session_id);
  // How long a response has been running with no connection attached; nullopt when none runs or
  // a connection is attached.
  std::optional<Clock::duration> unattached_for(const std::string& session_id);
  // Drops the kept events of the responses that have ended, once no connection has been attached
  // for `unread_for`: a reader attached now, or one that left less than that ago, may still ask
  // for them again. Returns whether it dropped them (the numbering goes on either way).
  bool trim_finished(const std::string& session_id, Clock::duration unread_for);
  void forget(const std::string& session_id);  // the session is closed

  size_t kept_bytes();  // all sessions together (metrics)

 private:
  struct Kept {
    int64_t seq;
    size_t bytes;
    boost::json::object event;
  };
  struct Stream {
    int64_t last_seq = 0;
    std::deque<Kept> kept;
    size_t kept_bytes = 0;
    uint64_t connection = 0;  // 0: nobody attached
    Deliver deliver;
    bool running = false;            // between a kStart and a kEnd event
    int64_t finished_through = 0;    // the seq of the last kEnd event
    Clock::time_point detached_at;   // when connection last became 0
  };

  const size_t max_kept_bytes_;
  std::mutex mutex_;
  std::map<std::string, Stream, std::less<>> streams_;
  size_t total_kept_bytes_ = 0;
};

}  // namespace hippo::server
