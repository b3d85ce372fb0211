#include "pgoutbox/replication/stream.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <memory>

#include "pgoutbox/secrets.h"

namespace pgoutbox::replication {
namespace {

std::string trimmed_error(PGconn* conn) {
  std::string s = redact_secrets(PQerrorMessage(conn));
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

Stream::Stream(boost::asio::io_context& io, Connection& connection, StreamHandler& handler, StreamOptions options)
    : io_(io),
      connection_(connection),
      handler_(handler),
      options_(options),
      // A duplicate of libpq's socket: Asio may close its descriptor, libpq keeps its own.
      socket_(io, ::dup(PQsocket(connection.raw()))),
      status_timer_(io),
      liveness_timer_(io),
      stop_timer_(io),
      receive_timeout_(2 * connection.wal_sender_timeout()) {
  PQsetnonblocking(connection_.raw(), 1);
}

Stream::~Stream() {  // NOLINT(bugprone-exception-escape): timer cancel() cannot fail (stream.h)
  boost::system::error_code ignored;
  status_timer_.cancel();
  liveness_timer_.cancel();
  stop_timer_.cancel();
  socket_.cancel(ignored);
  socket_.close(ignored);
}

void Stream::start(std::function<void(const StreamEnd&)> on_end) {
  on_end_ = std::move(on_end);
  last_status_ = std::chrono::steady_clock::now();
  last_receive_ = last_status_;
  arm_status_timer();
  arm_liveness_timer();
  // libpq may already hold bytes that arrived with the START_REPLICATION response.
  boost::asio::post(io_, [this] { drain(); });
}

void Stream::set_flush(Lsn lsn) {
  // Postgres does not check what it is told: a decreasing flush would be accepted and would
  // move confirmed_flush backwards in memory. Never send one.
  if (lsn <= flush_) return;
  flush_ = lsn;
  // Tell the server soon, not only at the next interval: the slot's lag (and the WAL it keeps)
  // then trails the durable position by about a second at most.
  constexpr std::chrono::milliseconds kPromptStatus{1000};
  if (std::chrono::steady_clock::now() - last_status_ >= std::min(kPromptStatus, options_.status_interval)) {
    send_status(false);
  }
}

void Stream::send_status_now() {
  if (!ended_) send_status(false);
}

void Stream::pause() { paused_ = true; }

void Stream::resume() {
  if (!paused_) return;
  paused_ = false;
  last_receive_ = std::chrono::steady_clock::now();  // silence while paused was ours
  ping_sent_ = false;
  if (!ended_) boost::asio::post(io_, [this] { drain(); });
}

void Stream::stop() {
  if (ended_ || stopping_) return;
  send_status(false);
  stopping_ = true;
  // A server that never answers CopyDone (frozen, or the network gone) must not hold the stop.
  stop_timer_.expires_after(stop_timeout_);
  stop_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || ended_) return;
    end({StreamEnd::Reason::timeout,
         "the server did not end the replication copy within " + std::to_string(stop_timeout_.count()) +
             " ms of CopyDone",
         ""});
  });
  put_copy_end();
}

void Stream::put_copy_end() {
  if (ended_) return;
  const int rc = PQputCopyEnd(connection_.raw(), nullptr);
  if (rc < 0) {
    end({StreamEnd::Reason::error, "PQputCopyEnd failed: " + trimmed_error(connection_.raw()), ""});
    return;
  }
  if (rc == 0) {
    // Non-blocking libpq could not queue CopyDone (its buffer is full): try again once the
    // socket takes more.
    socket_.async_wait(boost::asio::posix::stream_descriptor::wait_write, [this](const boost::system::error_code& ec) {
      if (!ec) put_copy_end();
    });
    return;
  }
  flush_output();
  boost::asio::post(io_, [this] { drain(); });
}

void Stream::wait_readable() {
  if (ended_) return;
  if (!read_pending_) {
    read_pending_ = true;
    socket_.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                       [this](const boost::system::error_code& ec) { on_readable(ec); });
  }
  // Asio's reactor is edge-triggered, and PQconsumeInput reads only part of what the kernel
  // holds: bytes already waiting raise no new edge. Check the level too (pg_recvlogical's
  // select() does the same), or the tail of a burst would wait for the next keepalive.
  pollfd pfd{PQsocket(connection_.raw()), POLLIN, 0};
  if (::poll(&pfd, 1, 0) > 0) boost::asio::post(io_, [this] { consume_and_drain(); });
}

void Stream::on_readable(const boost::system::error_code& ec) {
  read_pending_ = false;
  if (ended_ || ec == boost::asio::error::operation_aborted) return;
  if (ec) {
    end({StreamEnd::Reason::error, "waiting on the replication socket: " + ec.message(), ""});
    return;
  }
  consume_and_drain();
}

void Stream::consume_and_drain() {
  // While paused, leave the bytes in the kernel: reading them into libpq would grow its buffer
  // without bound (I6). Resume drains and re-arms.
  if (ended_ || (paused_ && !stopping_)) return;
  if (PQconsumeInput(connection_.raw()) == 0) {
    end({StreamEnd::Reason::error, "replication connection lost: " + trimmed_error(connection_.raw()), ""});
    return;
  }
  drain();
}

void Stream::drain() {
  // A budget per turn, so that acknowledgements and timers get their turn under a flood.
  bool handled = false;
  for (int budget = 4096; !ended_ && (!paused_ || stopping_); --budget) {
    if (budget == 0) {
      boost::asio::post(io_, [this] { drain(); });
      return;
    }
    char* raw = nullptr;
    const int n = PQgetCopyData(connection_.raw(), &raw, 1);
    // Freed however the handler leaves (it may throw on a bug).
    const std::unique_ptr<char, decltype(&PQfreemem)> buffer(raw, &PQfreemem);
    if (n > 0) {
      const std::span<const std::byte> message(reinterpret_cast<const std::byte*>(raw), static_cast<std::size_t>(n));
      if (!stopping_) handle(message);
      handled = true;
      continue;
    }
    if (n == 0) {
      // Caught up means the kernel holds nothing more either: while a backlog streams in, the
      // socket stays readable and libpq's buffer merely ran dry between two reads.
      pollfd pending{PQsocket(connection_.raw()), POLLIN, 0};
      if (handled && !stopping_ && !ended_ && ::poll(&pending, 1, 0) == 0) handler_.on_caught_up();
      // The status update is due even when data never stops arriving.
      if (std::chrono::steady_clock::now() - last_status_ >= options_.status_interval) send_status(false);
      wait_readable();
      return;
    }
    if (n == -1) {
      finish_copy();
      return;
    }
    end({StreamEnd::Reason::error, "reading the replication stream: " + trimmed_error(connection_.raw()), ""});
    return;
  }
}

void Stream::handle(std::span<const std::byte> message) {
  const auto parsed = parse_copy_message(message);
  if (!parsed) {
    end({StreamEnd::Reason::error, "malformed CopyData message from the server", ""});
    return;
  }
  last_receive_ = std::chrono::steady_clock::now();
  ping_sent_ = false;
  if (const auto* data = std::get_if<XLogData>(&*parsed)) {
    // Relation and Type messages carry 0 in both positions (walsender.c WalSndPrepareWrite:
    // only the last write of a change has its LSN): received never goes back.
    received_ = std::max({received_, data->start, data->wal_end});
    handler_.on_data(*data);
  } else if (const auto* keepalive = std::get_if<Keepalive>(&*parsed)) {
    if (keepalive->wal_end > received_) received_ = keepalive->wal_end;
    handler_.on_keepalive(*keepalive);
    // Answer at once: the server asks when half of wal_sender_timeout has passed in silence.
    if (keepalive->reply_requested) send_status(false);
  }
  // Other CopyData types are not sent by a logical walsender; ignore them like pg_recvlogical.
}

void Stream::send_status(bool reply_requested) {
  // After CopyDone the client may send nothing more on the copy (stop() sends the last one).
  if (ended_ || stopping_) return;
  const auto msg = build_status_update(received_, flush_, flush_, std::chrono::system_clock::now(), reply_requested);
  if (PQputCopyData(connection_.raw(), reinterpret_cast<const char*>(msg.data()), static_cast<int>(msg.size())) <= 0) {
    end({StreamEnd::Reason::error, "sending a status update: " + trimmed_error(connection_.raw()), ""});
    return;
  }
  last_status_ = std::chrono::steady_clock::now();
  flush_output();
}

void Stream::flush_output() {
  const int rc = PQflush(connection_.raw());
  if (rc < 0) {
    end({StreamEnd::Reason::error, "replication connection lost while sending: " + trimmed_error(connection_.raw()),
         ""});
    return;
  }
  if (rc == 1 && !write_pending_) {
    write_pending_ = true;
    socket_.async_wait(boost::asio::posix::stream_descriptor::wait_write, [this](const boost::system::error_code& ec) {
      write_pending_ = false;
      if (!ec && !ended_) flush_output();
    });
  }
}

void Stream::arm_status_timer() {
  status_timer_.expires_at(last_status_ + options_.status_interval);
  status_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || ended_) return;
    if (std::chrono::steady_clock::now() - last_status_ >= options_.status_interval) send_status(false);
    arm_status_timer();
  });
}

void Stream::arm_liveness_timer() {
  if (receive_timeout_.count() <= 0) return;
  liveness_timer_.expires_after(std::max(std::chrono::milliseconds(1), receive_timeout_ / 4));
  liveness_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || ended_ || stopping_) return;  // stop() has its own deadline
    const auto now = std::chrono::steady_clock::now();
    if (paused_) {
      last_receive_ = now;
    } else if (now - last_receive_ >= receive_timeout_) {
      end({StreamEnd::Reason::timeout,
           "no message or keepalive from the server for " + std::to_string(receive_timeout_.count()) +
               " ms (twice wal_sender_timeout): the connection is presumed dead; reconnecting",
           ""});
      return;
    } else if (now - last_receive_ >= receive_timeout_ / 2 && !ping_sent_) {
      // An idle walsender that is fully confirmed may say nothing: ask it for a reply.
      send_status(true);
      ping_sent_ = true;
    }
    arm_liveness_timer();
  });
}

// The server ended the copy; collect its closing results. PQgetResult waits for the final
// CommandComplete, which follows CopyDone at once, so this brief block is acceptable.
void Stream::finish_copy() {
  StreamEnd result{stopping_ ? StreamEnd::Reason::stopped : StreamEnd::Reason::server_closed, "", ""};
  while (PGresult* res = PQgetResult(connection_.raw())) {
    const auto status = PQresultStatus(res);
    if (status == PGRES_FATAL_ERROR) {
      result.reason = StreamEnd::Reason::error;
      result.message = redact_secrets(PQresultErrorMessage(res));
      while (!result.message.empty() && result.message.back() == '\n') result.message.pop_back();
      const char* state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
      result.sqlstate = state != nullptr ? state : "";
    }
    PQclear(res);
  }
  end(result);
}

void Stream::end(const StreamEnd& result) {
  if (ended_) return;
  ended_ = true;
  boost::system::error_code ignored;
  status_timer_.cancel();
  liveness_timer_.cancel();
  stop_timer_.cancel();
  socket_.cancel(ignored);
  if (on_end_) on_end_(result);
}

}  // namespace pgoutbox::replication
