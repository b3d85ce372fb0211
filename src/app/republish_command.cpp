// `pgoutbox republish`: rows already in an outbox table published again, read with the
// backfill's reader and published by a Relay of their own (relay/backfill.h), so they go through
// the same mapping, producer, caps and poison policy as the stream. The slot is never touched.
#include <unistd.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <boost/asio/io_context.hpp>
#include <cstdio>

#include "load_config.h"
#include "operator_commands.h"
#include "pgoutbox/config/predicate.h"
#include "pgoutbox/kafka/producer_sink.h"
#include "pgoutbox/relay/backfill.h"
#include "pgoutbox/relay/relay.h"
#include "pgoutbox/secrets.h"
#include "run_command.h"

namespace pgoutbox::app {
namespace {

// The configured table `name` names: schema.table, or a table of schema public.
const config::TableConfig* find_table(const config::Config& cfg, const std::string& name) {
  for (const auto& t : cfg.tables) {
    if (name == t.schema + "." + t.name || (t.schema == "public" && name == t.name)) return &t;
  }
  return nullptr;
}

}  // namespace

int republish(const std::string& config_path, const RepublishOptions& options) {
  const auto loaded = load_config_or_report(config_path);
  if (!loaded) return kExitConfig;
  // The records carry their own header, and no provenance: they have no commit LSN of this slot.
  config::Config cfg = *loaded;
  cfg.provenance_headers = false;
  // Republished rows are published again by nature: no Kafka transaction, no checkpoint.
  cfg.delivery = config::Delivery::at_least_once;
  const auto* table = find_table(cfg, options.table);
  if (table == nullptr) {
    std::string known;
    for (const auto& t : cfg.tables) known += (known.empty() ? "" : ", ") + t.schema + "." + t.name;
    fmt::print(stderr, "--table {} is not a configured table ({})\n", options.table, known);
    return kExitUsage;
  }
  relay::RowSelection selection{{table->schema, table->name},
                                options.where,
                                table->backfill.order_by.empty() ? table->columns.id : table->backfill.order_by,
                                table->backfill.chunk_rows,
                                table->backfill.statement_timeout};
  const std::string label = table->schema + "." + table->name;
  // Before any connection: a predicate that could reach past WHERE (...) is not sent at all.
  if (const auto problem = config::predicate_problem(options.where); !problem.empty()) {
    fmt::print(stderr,
               "--where {}: it must be one expression over the columns of {}, as in WHERE (...); nothing was "
               "published\n",
               problem, label);
    return kExitUsage;
  }
  try {
    relay::RowReader reader(cfg.postgres, "");
    if (auto error = reader.explain_error(selection)) {
      fmt::print(stderr,
                 "--where: SELECT * FROM {} WHERE ({}) ORDER BY {} is refused by PostgreSQL: {}; nothing was "
                 "published\n",
                 label, selection.where, selection.order_by, *error);
      return kExitUsage;
    }
    // The count and the rows come from one snapshot: the count is what is published.
    const auto total = reader.count(selection);
    fmt::print("{} row(s) of {} match WHERE ({}){}\n", total, label, selection.where,
               options.dry_run ? "; --dry-run: nothing published" : "");
    std::fflush(stdout);
    if (options.dry_run || total == 0) return kExitOk;

    boost::asio::io_context io;
    relay::Observer observer;
    relay::AsioClock clock(io);
    relay::Relay publisher(
        cfg, io, clock,
        kafka::producer_sink_factory(kafka::SinkSettings{
            cfg.kafka.brokers, cfg.kafka.properties, cfg.limits.max_in_flight_records, cfg.limits.max_in_flight_bytes}),
        observer);
    publisher.add_header(outbox::Header{"pgoutbox.republished", "true"});
    const bool terminal = isatty(STDERR_FILENO) == 1;
    relay::RowSource source(io, reader, {{selection, total}}, [&](const relay::RowProgress& p) {
      if (terminal) {
        fmt::print(stderr, "\r{}: {} of {} published ({}%)", p.table, p.published, p.total,
                   p.total == 0 ? 100 : p.published * 100 / p.total);
      } else {
        spdlog::info("republish {}: {} row(s) read, {} published of {}", p.table, p.read, p.published, p.total);
      }
    });
    relay::SessionStart start;
    start.identity = kafka::SlotIdentity{"", "", "republish"};
    const auto outcome = publisher.run(source, std::move(start));
    if (terminal) fmt::print(stderr, "\n");
    if (source.finished()) {
      fmt::print("published {} row(s) of {} again, each with header pgoutbox.republished: true\n", total, label);
      return kExitOk;
    }
    fmt::print(stderr, "republish of {} ended before every record was acknowledged: {}\n", label,
               redact_secrets(outcome.reason));
    if (outcome.kind == relay::Outcome::Kind::fatal) return relay::exit_code(outcome.cause);
    return kExitPostgres;
  } catch (const replication::PgError& e) {
    fmt::print(stderr, "republish of {}: {}\n", label, e.what());
    return kExitPostgres;
  }
}

}  // namespace pgoutbox::app
