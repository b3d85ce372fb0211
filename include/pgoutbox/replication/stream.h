#pragma once

// The CopyBoth loop of a logical replication connection, in the shape of pg_recvlogical.c's
// StreamLogicalLog, driven by Boost.Asio: wait for the socket to be readable, drain
// PQgetCopyData without blocking, hand each XLogData payload to the handler, answer keepalives
// that ask for a reply, and send standby status updates on a timer.
//
// "Received" and "durable" are different positions (docs/style.md §6). The flush position sent to
// the server is an input (set_flush), never derived here from what was merely received: the
// server moves the slot's confirmed_flush to it, and WAL before it may be recycled.
//
// Not thread-safe: call everything from the io_context's thread.

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <string>

#include "pgoutbox/lsn.h"
#include "pgoutbox/replication/connection.h"
#include "pgoutbox/replication/copy_protocol.h"

namespace pgoutbox::replication {

class StreamHandler {
 public:
  virtual ~StreamHandler() = default;
  // One pgoutput message. data.payload is valid only during the call.
  virtual void on_data(const XLogData& data) = 0;
  // Server keepalive: wal_end is the end of the last WAL record the walsender decoded.
  virtual void on_keepalive(const Keepalive& /*keepalive*/) {}
  // Everything the server has sent so far was handled: the stream is caught up for now.
  virtual void on_caught_up() {}
};

struct StreamOptions {
  // Well inside wal_sender_timeout (default 60 s): any client message resets the server's clock.
  std::chrono::milliseconds status_interval{10'000};
};

struct StreamEnd {
  enum class Reason {
    stopped,        // stop() was called and the server ended the copy cleanly
    server_closed,  // the server ended the copy on its own (e.g. shutdown)
    error,          // connection lost or the server reported an error
    timeout,        // no message from the server for receive_timeout, or no end of copy after stop()
  };
  Reason reason = Reason::stopped;
  std::string message;
  std::string sqlstate;
};

class Stream {
 public:
  // `connection` must already be in CopyBoth mode (Connection::start_replication).
  Stream(boost::asio::io_context& io, Connection& connection, StreamHandler& handler, StreamOptions options = {});
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  // Only the timers' cancel() has a throwing signature; it reports no error on any reactor.
  ~Stream();  // NOLINT(bugprone-exception-escape): cannot throw, see above

  // Silence after which the connection is presumed dead (a frozen server, a half-open TCP
  // connection): the stream ends with Reason::timeout. Half-way through, a status update asks
  // the server for a reply, as walreceiver does with wal_receiver_timeout. The default is twice
  // the server's wal_sender_timeout as read at START_REPLICATION (none when that is 0); zero
  // turns it off. Not counted while paused: nothing is read then. Call before start().
  void set_receive_timeout(std::chrono::milliseconds timeout) { receive_timeout_ = timeout; }
  std::chrono::milliseconds receive_timeout() const { return receive_timeout_; }
  // How long stop() waits for the server to end the copy after CopyDone (default 10 s).
  void set_stop_timeout(std::chrono::milliseconds timeout) { stop_timeout_ = timeout; }

  // Begins reading; `on_end` is called once, when the stream has ended for any reason.
  void start(std::function<void(const StreamEnd&)> on_end);

  // The position up to which everything is durably handled. Never decreases: a lower value is
  // ignored. Sent at once when the last status update is a second old, else with the next.
  void set_flush(Lsn lsn);
  // Sends a status update now (e.g. right after the flush position moved a lot).
  void send_status_now();

  // Backpressure: while paused nothing is read (the server keeps the WAL and eventually blocks
  // on its send), but status updates still go out, so the server does not time us out.
  void pause();
  void resume();
  bool paused() const { return paused_; }

  // Clean stop: a last status update, CopyDone, and drain until the server ends the copy.
  // Messages that arrive after stop() are dropped (never handed to the handler).
  void stop();

  Lsn received() const { return received_; }
  Lsn flushed() const { return flush_; }

 private:
  void wait_readable();
  void on_readable(const boost::system::error_code& ec);
  void consume_and_drain();
  void drain();
  void handle(std::span<const std::byte> message);
  void send_status(bool reply_requested);
  void flush_output();
  void arm_status_timer();
  void arm_liveness_timer();
  void put_copy_end();
  void finish_copy();
  void end(const StreamEnd& result);

  boost::asio::io_context& io_;
  Connection& connection_;
  StreamHandler& handler_;
  StreamOptions options_;
  boost::asio::posix::stream_descriptor socket_;
  boost::asio::steady_timer status_timer_;
  boost::asio::steady_timer liveness_timer_;
  boost::asio::steady_timer stop_timer_;
  std::chrono::milliseconds receive_timeout_{0};
  std::chrono::milliseconds stop_timeout_{10'000};
  std::function<void(const StreamEnd&)> on_end_;

  Lsn received_;
  Lsn flush_;
  bool paused_ = false;
  bool stopping_ = false;
  bool ended_ = false;
  bool read_pending_ = false;
  bool write_pending_ = false;
  std::chrono::steady_clock::time_point last_status_{};
  std::chrono::steady_clock::time_point last_receive_{};
  bool ping_sent_ = false;
};

}  // namespace pgoutbox::replication
