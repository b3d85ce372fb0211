#include "send_backlog.h"

namespace pgoutbox::relay {

SendBacklog::SendBacklog(Clock& clock, TrySend try_send, std::function<void()> round)
    : try_send_(std::move(try_send)), round_(std::move(round)), timer_(clock.timer()), clock_(clock) {}

bool SendBacklog::send(const outbox::Record& record, DeliveryCookie cookie) {
  if (waiting_.empty() && try_send_(record, cookie)) return true;
  waiting_.push_back({record, cookie});
  if (waiting_.size() == 1) arm();
  return false;
}

bool SendBacklog::drain() {
  while (!waiting_.empty()) {
    if (!try_send_(waiting_.front().record, waiting_.front().cookie)) return false;
    waiting_.pop_front();
  }
  return true;
}

void SendBacklog::arm() { clock_.after(*timer_, kRetry, round_); }

}  // namespace pgoutbox::relay
