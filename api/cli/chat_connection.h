// The plumbing under `hippo chat` (chat_command.cpp): one WebSocket connection to `hippo serve`'s
// /v1/agents endpoint on a thread of its own, a thread reading lines from stdin, and one inbox in
// which both (and Ctrl-C) leave what happened, in order, for the single thread that runs the chat.
// Nothing here knows the agents protocol beyond "an event is one JSON object in one text frame".
#pragma once

#include "base/status.h"

#include <boost/json/object.hpp>

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

namespace hippo::cli::chat {

// ws://host[:port][/path] or wss://… (TLS; port 443 by default).
struct Url {
  std::string text;  // as given
  bool tls = false;  // wss://
  std::string host;  // without brackets for IPv6
  std::string port;
  std::string target;  // "/v1/agents"
  // "host:port" for the Host header (IPv6 in brackets).
  std::string host_header() const;
};

Result<Url> parse_ws_url(std::string_view text);

// How a wss:// connection checks the server's certificate: against ca_file (PEM), or the system's
// certificate authorities when it is empty; and always against the URL's host name or address.
struct TlsTrust {
  std::string ca_file;
};

// One thing for the chat loop to act on.
struct Inbound {
  enum class Kind {
    kEvent,       // a server event (`event`)
    kLine,        // a line of input, without its line ending (`text`)
    kEndOfInput,  // stdin ended
    kInterrupt,   // Ctrl-C (SIGINT)
    kClosed,      // the connection ended; `text` says how (empty when this client closed it)
  };
  Kind kind = Kind::kEvent;
  boost::json::object event;
  std::string text;

  static Inbound server_event(boost::json::object e);
  static Inbound line(std::string text);
  static Inbound signal(Kind kind);
  static Inbound closed(std::string why);
};

// A blocking multi-producer queue of Inbound.
class Inbox {
 public:
  void push(Inbound item);
  Inbound pop();

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Inbound> items_;
};

// A WebSocket client connection. Events arrive in the inbox (and kClosed when the connection
// ends); send() may be called from any thread. SIGINT is caught while it is open and arrives as
// kInterrupt.
class Connection {
 public:
  // Connects (with TLS for wss://) and performs the upgrade with `Authorization: Bearer api_key`
  // when a key is given. Errors name the URL and say what to do: a refused connection, a
  // certificate that is not trusted, a refused upgrade (HTTP status and the server's message), a
  // timeout.
  static Result<std::unique_ptr<Connection>> open(const Url& url, const TlsTrust& trust, const std::string& api_key,
                                                  Inbox& inbox);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  void send(const boost::json::object& event);
  // A normal close (1000); waits a few seconds at most for the server's answer.
  void close();

 private:
  struct Impl;
  explicit Connection(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Reads stdin on its own thread, line by line, into the inbox; kEndOfInput at the end.
class InputReader {
 public:
  explicit InputReader(Inbox& inbox);
  ~InputReader();
  InputReader(const InputReader&) = delete;
  InputReader& operator=(const InputReader&) = delete;

 private:
  void run();
  Inbox& inbox_;
  int wake_[2] = {-1, -1};
  std::thread thread_;
};

struct HttpReply {
  int status = 0;
  std::string body;
};

// GET http(s)://host:port{path} on the server that `url` names, with the API key when given;
// errors are connection failures only (any HTTP status is a reply).
Result<HttpReply> http_get(const Url& url, const TlsTrust& trust, std::string_view path, const std::string& api_key);

}  // namespace hippo::cli::chat
