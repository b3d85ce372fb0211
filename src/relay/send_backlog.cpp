#include "send_backlog.h"

#include <utility>

namespace pgoutbox::relay {

SendBacklog::SendBacklog(Clock& clock, TrySend try_send, std::function<void()> round)
    : try_send_(std::move(try_send)), round_(std::move(round)), timer_(clock.timer()), clock_(clock) {}

bool SendBacklog::send(const outbox::Record& record, DeliveryCookie cookie) {
  if (waiting_.empty() && try_send_(record, cookie)) return true;
  waiting_.push_back({record, cookie});
  if (waiting_.size() == 1) arm();
  return false;
}

// Each record leaves the queue before it is tried: a send may end the Kafka transaction and
// take() what still waits, to publish it again after what the transaction held.
bool SendBacklog::drain() {
  while (!waiting_.empty()) {
    auto next = std::move(waiting_.front());
    waiting_.pop_front();
    if (!try_send_(next.record, next.cookie)) {
      waiting_.push_front(std::move(next));
      return false;
    }
  }
  return true;
}

std::deque<SendBacklog::Waiting> SendBacklog::take() {
  timer_->cancel();
  return std::exchange(waiting_, {});
}

void SendBacklog::arm() { clock_.after(*timer_, kRetry, round_); }

}  // namespace pgoutbox::relay
