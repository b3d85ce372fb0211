// The record formats' CPU cost per record with nothing else on the machine's mind: the record
// builder (outbox::Mapping, as the relay calls it) and what librdkafka does with the record's
// headers (added to a header list when produced, freed with the delivered message), for the same
// rows in each format of bench/formats.h, in one process. The backlog drain (`bench_compare
// --formats`) measures the same formats with Postgres and Kafka sharing the cores; this one
// shows where a difference comes from, with a run-to-run spread of a few percent.

#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "pgoutbox/outbox/mapping.h"
#include "pgoutbox/pgoutput/relation_cache.h"

namespace {

using namespace pgoutbox;

struct Case {
  std::string name;
  config::FormatConfig format;
};

std::vector<Case> cases() {
  const auto with = [](config::Format type, bool schemas = true, bool expand = false) {
    config::FormatConfig f;
    f.type = type;
    f.schemas = schemas;
    f.expand_json_payload = expand;
    if (f.cloudevents()) f.source = "/bench/public.outbox";
    return f;
  };
  return {{"string", with(config::Format::string)},
          {"debezium-json, schemas", with(config::Format::debezium_json)},
          {"debezium-json, no schemas", with(config::Format::debezium_json, false)},
          {"debezium-json, schemas, expanded payload", with(config::Format::debezium_json, true, true)},
          {"cloudevents-binary", with(config::Format::cloudevents_binary)},
          {"cloudevents-structured", with(config::Format::cloudevents_structured)}};
}

// The bench's outbox table (bench/compare.cpp) and rows as its workload writes them: jsonb
// payloads of 200 B as Postgres prints them, varchar keys.
const pgoutput::Relation& outbox_relation(pgoutput::RelationCache& cache) {
  pgoutput::RelationData msg;
  msg.relid = 16400;
  msg.nspname = "public";
  msg.relname = "outbox";
  const std::vector<std::pair<std::string, pgoutput::Oid>> columns = {
      {"id", 2950}, {"aggregatetype", 1043}, {"aggregateid", 1043}, {"type", 1043}, {"payload", 3802}};
  for (const auto& [name, oid] : columns) msg.columns.push_back({0, name, oid, -1});
  return cache.apply(msg);
}

struct Row {
  std::string id, aggregateid, payload;
};

std::vector<Row> rows(int count) {
  std::vector<Row> out;
  out.reserve(static_cast<std::size_t>(count));
  const std::string pad(160, 'x');
  for (int i = 0; i < count; ++i) {
    out.push_back({fmt::format("6f1c2a4e-9b7d-4c1e-8f00-{:012x}", i), fmt::format("customer-{}", i % 1000),
                   fmt::format(R"({{"pad": "{}", "seq": {}, "order": {}}})", pad, i % 10, 100000 + i / 10)});
  }
  return out;
}

struct Cost {
  double build_us = 0;    // building and destroying the record
  double headers_us = 0;  // librdkafka's header list for it, built and destroyed
  std::size_t value_bytes = 0;
  std::size_t header_bytes = 0;
};

Cost measure(const Case& c, const std::vector<Row>& input, int rounds) {
  pgoutput::RelationCache cache;
  config::TableConfig table;
  table.name = "outbox";
  table.format = c.format;
  outbox::Mapping mapping({table}, false, {}, [](pgoutput::Oid) { return std::vector<std::string>{"id"}; });
  const auto* resolved = mapping.resolve(outbox_relation(cache));
  if (resolved == nullptr) throw std::runtime_error("the outbox table did not resolve");

  std::vector<pgoutput::TupleData> tuples;
  for (const auto& r : input) {
    pgoutput::TupleData t;
    for (const std::string_view v : {std::string_view(r.id), std::string_view("order"), std::string_view(r.aggregateid),
                                     std::string_view("OrderCreated"), std::string_view(r.payload)}) {
      t.columns.push_back({pgoutput::ColumnKind::text, v});
    }
    tuples.push_back(std::move(t));
  }
  Cost cost;
  std::vector<double> build, headers;
  for (int round = 0; round < rounds; ++round) {
    std::int64_t txn_us = 1'800'000'000'000'000;
    std::chrono::nanoseconds built{0}, listed{0};
    for (std::size_t i = 0; i < tuples.size(); ++i) {
      const outbox::TxnContext txn{Lsn{0x1000 + i}, txn_us + static_cast<std::int64_t>(i),
                                   static_cast<std::uint32_t>(1000 + i / 10)};
      const auto t0 = std::chrono::steady_clock::now();
      auto result = resolved->build(tuples[i], txn);
      auto* record = std::get_if<outbox::Record>(&result);
      if (record == nullptr) throw std::runtime_error(std::get<outbox::Poison>(result).reason);
      const auto t1 = std::chrono::steady_clock::now();
      rd_kafka_headers_t* list = rd_kafka_headers_new(record->headers.size());
      for (const auto& h : record->headers) {
        rd_kafka_header_add(list, h.name.data(), static_cast<ssize_t>(h.name.size()), h.value.data(),
                            static_cast<ssize_t>(h.value.size()));
      }
      rd_kafka_headers_destroy(list);
      const auto t2 = std::chrono::steady_clock::now();
      if (i == 0) {
        cost.value_bytes = record->value.size();
        cost.header_bytes = 0;
        for (const auto& h : record->headers) cost.header_bytes += h.name.size() + h.value.size();
      }
      { auto gone = std::move(result); }
      const auto t3 = std::chrono::steady_clock::now();
      built += (t1 - t0) + (t3 - t2);
      listed += t2 - t1;
    }
    build.push_back(std::chrono::duration<double, std::micro>(built).count() / static_cast<double>(tuples.size()));
    headers.push_back(std::chrono::duration<double, std::micro>(listed).count() / static_cast<double>(tuples.size()));
  }
  std::sort(build.begin(), build.end());
  std::sort(headers.begin(), headers.end());
  cost.build_us = build[build.size() / 2];
  cost.headers_us = headers[headers.size() / 2];
  return cost;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The record formats' CPU per record: builder and librdkafka's header list, one process"};
  int records = 200'000;
  int rounds = 5;
  app.add_option("--records", records, "rows per round");
  app.add_option("--rounds", rounds, "rounds per format (the median is shown); formats alternate within a round");
  std::string only;
  app.add_option("--only", only, "only the formats whose name contains this (and string), e.g. to profile one");
  CLI11_PARSE(app, argc, argv);
  const auto input = rows(records);
  auto all = cases();
  std::erase_if(all, [&](const Case& c) { return c.name != "string" && c.name.find(only) == std::string::npos; });
  std::vector<Cost> costs;
  costs.reserve(all.size());
  for (const auto& c : all) costs.push_back(measure(c, input, rounds));
  fmt::print("| format | value bytes | header bytes | builder µs/record | header list µs/record | sum | of string |\n");
  fmt::print("|---|---|---|---|---|---|---|\n");
  const double reference = costs.front().build_us + costs.front().headers_us;
  for (std::size_t i = 0; i < all.size(); ++i) {
    const double sum = costs[i].build_us + costs[i].headers_us;
    fmt::print("| {} | {} | {} | {:.3f} | {:.3f} | {:.3f} | {:.2f}× |\n", all[i].name, costs[i].value_bytes,
               costs[i].header_bytes, costs[i].build_us, costs[i].headers_us, sum, sum / reference);
  }
  return 0;
}
