#pragma once

#include <libpq-fe.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace shop {

// A failed statement, with what a caller needs to decide what to do about it: the server's
// SQLSTATE (40001 serialization failure, 40P01 deadlock, ...; empty when no server answered)
// and whether the connection itself is gone.
class PgError : public std::runtime_error {
 public:
  PgError(const std::string& message, std::string sqlstate, bool connection_lost)
      : std::runtime_error(message), sqlstate_(std::move(sqlstate)), connection_lost_(connection_lost) {}
  const std::string& sqlstate() const { return sqlstate_; }
  bool connection_lost() const { return connection_lost_; }

 private:
  std::string sqlstate_;
  bool connection_lost_;
};

struct PgResultDeleter {
  void operator()(PGresult* result) const { PQclear(result); }
};
using PgResult = std::unique_ptr<PGresult, PgResultDeleter>;

// One libpq connection. Statements take text parameters ($1, $2, ...) and throw PgError.
class PgConnection {
 public:
  explicit PgConnection(std::string dsn);  // throws PgError when the server cannot be reached

  // Reconnects when the connection was lost; throws PgError while the server is still away.
  void ensure_connected();

  PgResult exec(const std::string& sql, const std::vector<std::string>& params = {});
  // Rows an INSERT/UPDATE/DELETE touched.
  static long affected_rows(const PgResult& result);

 private:
  struct ConnDeleter {
    void operator()(PGconn* conn) const { PQfinish(conn); }
  };
  std::string dsn_;
  std::unique_ptr<PGconn, ConnDeleter> conn_;
};

// BEGIN on construction, ROLLBACK on destruction unless commit() ran.
class Transaction {
 public:
  explicit Transaction(PgConnection& db);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  void commit();

 private:
  PgConnection& db_;
  bool done_ = false;
};

}  // namespace shop
