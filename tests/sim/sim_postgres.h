#pragma once

// The simulator's Postgres side: a WAL of committed outbox transactions (rolled-back work and
// other tables' changes only leave gaps between their LSNs, as pgoutput sends nothing of them),
// a replication slot whose confirmed_flush_lsn a Postgres crash rewinds to what its last
// checkpoint saved, and a ChangeSource that streams the slot in pgoutput messages on virtual time.
// A restore from a storage snapshot (simulation.cpp) puts the WAL and the slot back as they were
// at the snapshot, on the same timeline; what is written next takes the same positions again.

#include <functional>
#include <string>
#include <vector>

#include "pgoutbox/relay/change_source.h"
#include "sim_kafka.h"

namespace pgoutbox::sim {

struct Row {
  int id = 0;
  std::string event_id;
  std::string key;
  std::string type;     // aggregatetype: the topic's suffix
  bool poison = false;  // a broker policy refuses it, whatever its size
  // Poison before any send: its payload is NULL, so the relay cannot make a record of it
  // (NULL_PAYLOAD) and hands it to poison.policy at once. Also `poison`; an insert.
  bool malformed = false;
  // Bytes of padding in its payload: a row larger than its topic's max.message.bytes is
  // `oversized` (the relay can tell before sending it: poison.policy applies), or
  // `maybe_oversized` when only a limit lowered while the relay runs makes it so (the relay
  // learns it from Kafka's refusal, or reads the lowered limit first).
  std::size_t pad = 0;
  bool oversized = false;
  bool maybe_oversized = false;
  // A logical decoding message (pg_logical_emit_message) instead of an insert: transactional in
  // its transaction; non-transactional, alone between transactions (poison NON_TRANSACTIONAL).
  enum class Kind { insert, message, non_transactional_message } kind = Kind::insert;
};

struct WalTxn {
  Lsn commit_lsn;
  Lsn end_lsn;  // a non-transactional message's own LSN
  // When it committed (pgoutput's microseconds), set as it reaches the WAL: a database restored
  // from a snapshot writes other transactions at the same positions, with the same xids (the
  // position in the WAL: a restored server hands them out again) but later commit times.
  std::int64_t commit_time = 0;
  std::vector<Row> rows;
  bool non_transactional_message() const {
    return rows.size() == 1 && rows[0].kind == Row::Kind::non_transactional_message;
  }
};

struct SimSlot {
  std::vector<WalTxn> wal;
  Lsn wal_end;    // the server's WAL position (past gaps of other work)
  Lsn confirmed;  // confirmed_flush_lsn
  Lsn saved;      // what the last Postgres checkpoint saved of it
  void crash() { confirmed = saved; }
};

// One replication session's stream of the slot.
class SimSource final : public relay::ChangeSource {
 public:
  // `on_flush` sees every confirmation the relay sends, `before_each` runs before each message
  // is handed over (the checks run there).
  SimSource(SimSlot& slot, test::VirtualClock& clock, Rng& rng, std::function<void(Lsn)> on_flush,
            std::function<void()> before_each);
  ~SimSource() override;
  SimSource(const SimSource&) = delete;
  SimSource& operator=(const SimSource&) = delete;

  void start(relay::ChangeHandler& handler, std::function<void(relay::Outcome)> on_end) override;
  void set_flush(Lsn lsn) override;
  void pause() override { paused_ = true; }
  void resume() override;
  bool paused() const override { return paused_; }
  Lsn received() const override { return received_; }
  void stop() override;
  // The replication connection is lost (a Postgres crash or a network fault).
  void drop(std::string why);
  // More WAL arrived: stream it.
  void wake() { schedule(); }
  bool live() const { return handler_ != nullptr && !ended_; }

 private:
  void schedule();
  void pump();
  void end(relay::Outcome outcome);

  SimSlot& slot_;
  test::VirtualClock& clock_;
  Rng& rng_;
  std::function<void(Lsn)> on_flush_;
  std::function<void()> before_each_;
  std::shared_ptr<bool> alive_;
  relay::ChangeHandler* handler_ = nullptr;
  std::function<void(relay::Outcome)> on_end_;
  std::size_t txn_ = 0;   // next WAL transaction to stream
  std::size_t part_ = 0;  // within it: 0 Begin, 1..n inserts, n+1 Commit
  bool relation_sent_ = false;
  bool paused_ = false;
  bool ended_ = false;
  bool scheduled_ = false;
  bool caught_up_told_ = false;
  Lsn received_;
};

}  // namespace pgoutbox::sim
