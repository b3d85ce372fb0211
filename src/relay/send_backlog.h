#pragma once

// Records the producer's queue had no room for, in send order. They go before anything new
// (per-key order, docs/spec.md I4), tried again on a timer, so the io thread never blocks on a
// full queue: keepalives, signals and acks go on meanwhile, and reading pauses (I6).

#include <chrono>
#include <deque>
#include <functional>
#include <memory>

#include "pgoutbox/outbox/record.h"
#include "pgoutbox/relay/clock.h"
#include "pgoutbox/relay/delivery_cookie.h"

namespace pgoutbox::relay {

class SendBacklog {
 public:
  // False when the producer's queue has no room for the record.
  using TrySend = std::function<bool(const outbox::Record&, DeliveryCookie)>;
  // How soon a send the producer had no room for is tried again.
  static constexpr std::chrono::milliseconds kRetry{20};

  // `round` runs kRetry after arm(): it serves the producers and calls drain().
  SendBacklog(Clock& clock, TrySend try_send, std::function<void()> round);

  // Sends now, unless records already wait; false: it waits too (and the timer is armed).
  bool send(const outbox::Record& record, DeliveryCookie cookie);
  // Sends what waits, in order, until the queue is full again; true when nothing waits.
  bool drain();
  void arm();
  void cancel() { timer_->cancel(); }
  bool empty() const { return waiting_.empty(); }

  struct Waiting {
    outbox::Record record;
    DeliveryCookie cookie;
  };
  // What waits, in order, leaving nothing (the caller sends it again).
  std::deque<Waiting> take();

 private:
  TrySend try_send_;
  std::function<void()> round_;
  std::unique_ptr<Timer> timer_;
  Clock& clock_;
  std::deque<Waiting> waiting_;
};

}  // namespace pgoutbox::relay
