#include "poller.h"

#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <vector>

namespace shop {

namespace {

// {a,b,c}: a Postgres array literal of uuids (they hold no character that needs quoting).
std::string uuid_array(const std::vector<std::string>& ids) {
  std::string out = "{";
  for (std::size_t i = 0; i < ids.size(); ++i) out += (i == 0 ? "" : ",") + ids[i];
  return out + "}";
}

}  // namespace

void PollerStats::write_file(const std::string& path) const {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << "batches=" << batches << "\npublished=" << published << "\nfailed=" << failed << "\n";
    if (!out) throw std::runtime_error("cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw std::runtime_error("cannot replace " + path);
}

Poller::Poller(PgConnection& db, BatchPublisher& publisher, int batch_size, int max_retries)
    : db_(db), publisher_(publisher), batch_size_(batch_size), max_retries_(max_retries) {}

int Poller::poll_once(PollerStats& stats) {
  Transaction tx(db_);
  const auto claimed = db_.exec(
      "SELECT id::text, aggregatetype, aggregateid, type, coalesce(payload::text, '') FROM local_message "
      "WHERE status = 'NEW' AND retries < $2::int ORDER BY created_at LIMIT $1::int FOR UPDATE SKIP LOCKED",
      {std::to_string(batch_size_), std::to_string(max_retries_)});
  const int rows = PQntuples(claimed.get());
  if (rows == 0) return 0;
  std::vector<OutboxMessage> batch;
  batch.reserve(static_cast<std::size_t>(rows));
  for (int r = 0; r < rows; ++r) {
    batch.push_back({PQgetvalue(claimed.get(), r, 0), PQgetvalue(claimed.get(), r, 1), PQgetvalue(claimed.get(), r, 2),
                     PQgetvalue(claimed.get(), r, 3), PQgetvalue(claimed.get(), r, 4)});
  }
  const auto delivered = publisher_.publish(batch);
  std::vector<std::string> sent, failed;
  for (std::size_t i = 0; i < batch.size(); ++i) (delivered[i] ? sent : failed).push_back(batch[i].id);
  if (!sent.empty()) {
    db_.exec("UPDATE local_message SET status = 'SENT', sent_at = now() WHERE id = ANY($1::uuid[])",
             {uuid_array(sent)});
  }
  if (!failed.empty()) {
    db_.exec("UPDATE local_message SET retries = retries + 1 WHERE id = ANY($1::uuid[])", {uuid_array(failed)});
  }
  tx.commit();
  ++stats.batches;
  stats.published += static_cast<std::int64_t>(sent.size());
  stats.failed += static_cast<std::int64_t>(failed.size());
  return rows;
}

}  // namespace shop
