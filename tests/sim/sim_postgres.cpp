#include "sim_postgres.h"

#include "../relay/relay_fakes.h"

namespace pgoutbox::sim {

using namespace std::chrono_literals;
namespace rt = relay::testing;

namespace {
constexpr std::size_t kMessagesPerRead = 64;  // what one read of the socket hands over
constexpr auto kKeepaliveInterval = 500ms;

// The row's payload (a JSON object): a policy refuses one that says POISON.
std::string payload(const Row& row) {
  if (row.poison) return R"({"POISON":true})";
  if (row.pad > 0) return fmt::format(R"({{"pad":"{}"}})", std::string(row.pad, 'x'));
  return "{}";
}

// A row whose payload is NULL: poison NULL_PAYLOAD before any send (poison.null_payload's default).
rt::Bytes malformed_insert(const Row& row) {
  rt::MessageBuilder m('I');
  m.int32(rt::kRelid).int8('N').int16(5);
  m.text_column(row.event_id).text_column(row.type).text_column(row.key).text_column("Created").null_column();
  return m;
}

rt::Bytes message(const Row& row, Lsn lsn) {
  const std::string envelope = fmt::format(R"({{"id":"{}","aggregatetype":"{}","aggregateid":"{}","payload":{}}})",
                                           row.event_id, row.type, row.key, payload(row));
  return rt::MessageBuilder('M')
      .int8(row.kind == Row::Kind::message ? 1 : 0)
      .int64(lsn.value)
      .string("outbox")
      .int32(static_cast<std::uint32_t>(envelope.size()))
      .raw(envelope);
}
}  // namespace

SimSource::SimSource(SimSlot& slot, test::VirtualClock& clock, Rng& rng, std::function<void(Lsn)> on_flush,
                     std::function<void()> before_each)
    : slot_(slot),
      clock_(clock),
      rng_(rng),
      on_flush_(std::move(on_flush)),
      before_each_(std::move(before_each)),
      alive_(std::make_shared<bool>(true)) {
  while (txn_ < slot_.wal.size() && slot_.wal[txn_].end_lsn <= slot_.confirmed) ++txn_;
  received_ = slot_.confirmed;
}

SimSource::~SimSource() { *alive_ = false; }

void SimSource::start(relay::ChangeHandler& handler, std::function<void(relay::Outcome)> on_end) {
  handler_ = &handler;
  on_end_ = std::move(on_end);
  schedule();
  // A chain of keepalives while the session lives; each re-arms the next.
  auto chain = std::make_shared<std::function<void()>>();
  *chain = [this, alive = alive_, chain_weak = std::weak_ptr<std::function<void()>>(chain)] {
    if (!*alive || !live()) return;
    const bool caught_up = txn_ == slot_.wal.size() && part_ == 0;
    const Lsn wal_end = caught_up ? slot_.wal_end : received_;
    if (wal_end > received_) received_ = wal_end;
    handler_->on_keepalive(replication::Keepalive{wal_end, 0, false});
    if (auto next = chain_weak.lock()) clock_.schedule_after(kKeepaliveInterval, [next] { (*next)(); });
  };
  clock_.schedule_after(kKeepaliveInterval, [chain] { (*chain)(); });
}

void SimSource::set_flush(Lsn lsn) {
  if (ended_) return;  // the connection is gone: the server never hears it
  on_flush_(lsn);
  if (lsn > slot_.confirmed) slot_.confirmed = lsn;
}

void SimSource::resume() {
  paused_ = false;
  schedule();
}

void SimSource::stop() {
  if (ended_) return;
  end(relay::Outcome::stopped());
}

void SimSource::drop(std::string why) {
  if (!live()) return;
  end(relay::Outcome::reconnect(std::move(why)));
}

void SimSource::end(relay::Outcome outcome) {
  ended_ = true;
  clock_.schedule_after(0ms, [alive = alive_, this, outcome = std::move(outcome)] {
    if (*alive) on_end_(outcome);
  });
}

void SimSource::schedule() {
  if (scheduled_ || paused_ || !live() || txn_ >= slot_.wal.size()) return;
  scheduled_ = true;
  const auto delay = std::chrono::microseconds(std::uniform_int_distribution<int>(0, 2000)(rng_));
  clock_.schedule_after(delay, [alive = alive_, this] {
    if (!*alive) return;
    scheduled_ = false;
    pump();
  });
}

void SimSource::pump() {
  std::size_t handed = 0;
  while (handed < kMessagesPerRead && !paused_ && live() && txn_ < slot_.wal.size()) {
    const auto& txn = slot_.wal[txn_];
    caught_up_told_ = false;
    ++handed;
    before_each_();
    if (txn.non_transactional_message()) {
      const auto m = message(txn.rows[0], txn.end_lsn);
      ++txn_;
      if (txn.end_lsn > received_) received_ = txn.end_lsn;
      handler_->on_data(replication::XLogData{txn.end_lsn, txn.end_lsn, 0, m});
    } else if (part_ == 0) {
      if (!relation_sent_) {
        relation_sent_ = true;
        const auto r = rt::relation();
        handler_->on_data(replication::XLogData{Lsn{}, Lsn{}, 0, r});
        if (!live()) return;
      }
      const auto b = rt::begin(txn.commit_lsn.value, static_cast<std::uint32_t>(txn_ + 1000), txn.commit_time);
      ++part_;
      handler_->on_data(replication::XLogData{Lsn{}, Lsn{}, 0, b});
    } else if (part_ <= txn.rows.size()) {
      const auto& row = txn.rows[part_ - 1];
      const auto change = row.kind == Row::Kind::message ? message(row, txn.commit_lsn)
                          : row.malformed                ? malformed_insert(row)
                                                         : rt::insert(row.id, row.key, payload(row), row.type);
      ++part_;
      handler_->on_data(replication::XLogData{Lsn{}, Lsn{}, 0, change});
    } else {
      const auto c = rt::commit(txn.commit_lsn.value, txn.end_lsn.value, txn.commit_time);
      part_ = 0;
      ++txn_;
      if (txn.end_lsn > received_) received_ = txn.end_lsn;
      handler_->on_data(replication::XLogData{txn.end_lsn, txn.end_lsn, 0, c});
    }
  }
  if (!live()) return;
  if (txn_ < slot_.wal.size()) {
    schedule();
  } else if (!caught_up_told_ && part_ == 0) {
    caught_up_told_ = true;
    handler_->on_caught_up();
  }
}

}  // namespace pgoutbox::sim
