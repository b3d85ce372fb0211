#pragma once

// A test StreamHandler: decodes every pgoutput message and keeps owned copies of the
// transactions, rows and logical messages, so tests can assert what a user would see.

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pgoutbox/pgoutput/decoder.h"
#include "pgoutbox/pgoutput/relation_cache.h"
#include "pgoutbox/replication/connection.h"
#include "pgoutbox/replication/stream.h"

namespace pgoutbox::test {

struct CollectedRow {
  std::string schema;
  std::string table;
  pgoutput::Oid relid = 0;
  std::vector<std::string> columns;
  std::vector<pgoutput::ColumnKind> kinds;
  std::vector<std::optional<std::string>> values;
  std::uint64_t relation_generation = 0;

  const std::optional<std::string>& value(const std::string& column) const;
};

struct CollectedMessage {
  bool transactional = false;
  std::string prefix;
  std::string content;
};

struct CollectedTxn {
  pgoutput::Xid xid = 0;
  Lsn final_lsn;
  Lsn commit_lsn;
  Lsn end_lsn;
  std::vector<CollectedRow> rows;
  std::vector<CollectedMessage> messages;
};

class Collector : public replication::StreamHandler {
 public:
  void on_data(const replication::XLogData& data) override;
  void on_keepalive(const replication::Keepalive& keepalive) override { keepalives.push_back(keepalive.wal_end); }

  std::vector<CollectedTxn> txns;
  std::vector<CollectedMessage> standalone_messages;  // non-transactional logical messages
  std::vector<std::string> errors;                    // decode or sequencing errors
  std::vector<Lsn> keepalives;
  std::size_t relation_messages = 0;
  std::size_t rows_seen = 0;  // committed or not, as they arrive

 private:
  pgoutput::RelationCache relations_;
  std::optional<CollectedTxn> current_;
};

// One replication session on its own io_context, run from the test's thread.
class Session {
 public:
  Session(const std::string& dsn, const replication::StartOptions& start, replication::StreamOptions options = {});
  ~Session();

  // Runs the io_context until `done()` holds, the stream ends, or the timeout passes.
  template <class Pred>
  bool run_until(Pred&& done, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!done()) {
      if (ended || std::chrono::steady_clock::now() >= deadline) return done();
      io.run_for(std::chrono::milliseconds(20));
    }
    return true;
  }
  // stop() and run until the stream has ended.
  void stop_and_wait();

  boost::asio::io_context io;
  replication::Connection connection;
  Collector collector;
  std::unique_ptr<replication::Stream> stream;
  std::optional<replication::StreamEnd> ended;
};

}  // namespace pgoutbox::test
