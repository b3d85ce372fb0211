#include "pg.h"

namespace shop {

namespace {

std::string trimmed(const char* text) {
  std::string s = text != nullptr ? text : "";
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

PgConnection::PgConnection(std::string dsn) : dsn_(std::move(dsn)) { ensure_connected(); }

void PgConnection::ensure_connected() {
  if (conn_ && PQstatus(conn_.get()) == CONNECTION_OK) return;
  conn_.reset(PQconnectdb(dsn_.c_str()));
  if (PQstatus(conn_.get()) != CONNECTION_OK) {
    throw PgError("cannot connect: " + trimmed(PQerrorMessage(conn_.get())), "", true);
  }
}

PgResult PgConnection::exec(const std::string& sql, const std::vector<std::string>& params) {
  std::vector<const char*> values;
  values.reserve(params.size());
  for (const auto& p : params) values.push_back(p.c_str());
  PgResult result(PQexecParams(conn_.get(), sql.c_str(), static_cast<int>(values.size()), nullptr, values.data(),
                               nullptr, nullptr, 0));
  const auto status = result ? PQresultStatus(result.get()) : PGRES_FATAL_ERROR;
  if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) return result;
  const char* state = result ? PQresultErrorField(result.get(), PG_DIAG_SQLSTATE) : nullptr;
  throw PgError(trimmed(PQerrorMessage(conn_.get())), state != nullptr ? state : "",
                PQstatus(conn_.get()) != CONNECTION_OK);
}

long PgConnection::affected_rows(const PgResult& result) {
  const char* n = PQcmdTuples(result.get());
  return (n != nullptr && *n != '\0') ? std::stol(n) : 0;
}

Transaction::Transaction(PgConnection& db) : db_(db) { db_.exec("BEGIN"); }

Transaction::~Transaction() {
  if (done_) return;
  try {
    db_.exec("ROLLBACK");
  } catch (const PgError&) {
    // The connection is gone: the server rolled the transaction back itself.
  }
}

void Transaction::commit() {
  done_ = true;  // a failed COMMIT has ended the transaction too
  db_.exec("COMMIT");
}

}  // namespace shop
