#include "scale.h"

#include <algorithm>

#include <fmt/format.h>

namespace pgoutbox::bench {
namespace {

ScalePoint point(std::string curve, std::int64_t x, int events_per_txn, int payload_bytes, std::int64_t events,
                 int keys) {
  ScalePoint p{std::move(curve), x, {}};
  p.backlog.events_per_txn = events_per_txn;
  p.backlog.payload_bytes = payload_bytes;
  p.backlog.events = std::max<std::int64_t>(events, events_per_txn);
  p.backlog.keys = keys;
  return p;
}

}  // namespace

std::vector<ScalePoint> scale_points(bool smoke) {
  std::vector<ScalePoint> points;
  // Payload: about the same bytes at every size (128 MiB, at most 100,000 events), 10-event
  // transactions, 1,000 keys.
  for (const int bytes : smoke ? std::vector<int>{100, 65536} : std::vector<int>{100, 1024, 4096, 16384, 65536}) {
    const std::int64_t events = smoke ? 200 : std::clamp<std::int64_t>((128LL << 20) / bytes, 2000, 100'000);
    points.push_back(point("payload", bytes, 10, bytes, events, 1000));
  }
  // Events per transaction, 200 B each; the two largest sizes as one or ten transactions.
  for (const int txn : smoke ? std::vector<int>{1, 1000} : std::vector<int>{1, 10, 100, 1000, 10'000, 100'000}) {
    const std::int64_t events = smoke ? 1000 : (txn >= 10'000 ? 100'000 : 50'000);
    points.push_back(point("transaction", txn, txn, 200, events, 1000));
  }
  // Distinct aggregate ids (message keys); at least as many events as keys.
  for (const int keys : smoke ? std::vector<int>{10, 1000} : std::vector<int>{10, 1000, 100'000, 1'000'000}) {
    const std::int64_t events = smoke ? 500 : std::max<std::int64_t>(200'000, keys);
    points.push_back(point("keys", keys, 10, 200, events, keys));
  }
  // Backlog size, for peak RSS.
  for (const std::int64_t events :
       smoke ? std::vector<std::int64_t>{500, 2000} : std::vector<std::int64_t>{10'000, 100'000, 1'000'000}) {
    points.push_back(point("backlog", events, 10, 200, events, 1000));
  }
  return points;
}

ScaleRow measure_scale_point(const Bench& bench, const ScalePoint& p) {
  progress(fmt::format("scale {} = {} ({} events, {} per transaction, {} B, {} keys)", p.curve, p.x, p.backlog.events,
                       p.backlog.events_per_txn, p.backlog.payload_bytes, p.backlog.keys));
  bench.pg.exec("TRUNCATE orders, outbox");
  const std::string slot = fmt::format("scale_{}_{}", p.curve, p.x);
  bench.pg.exec(fmt::format("SELECT pg_create_logical_replication_slot('{}', 'pgoutput')", slot));
  write_backlog(bench, p.backlog);
  const Lsn end = end_of_backlog(bench);
  ScaleRow row{
      p.curve, p.x, p.backlog.events,
      drain(bench, Contender::pgoutbox, slot, end, fmt::format("bench.scale.{}.{}", p.curve, p.x), p.backlog.events)};
  bench.pg.drop_slot_when_free(slot);
  progress(fmt::format("  {:.0f} events/s, {:.1f} µs CPU/event, peak RSS {:.1f} MiB", row.events_per_second(),
                       1e6 * row.result.process.cpu_s / static_cast<double>(row.events),
                       static_cast<double>(row.result.process.peak_rss_kib) / 1024.0));
  return row;
}

}  // namespace pgoutbox::bench
