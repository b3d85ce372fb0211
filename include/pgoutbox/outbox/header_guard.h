#pragma once

// What a row's headers column may add to a record (SECURITY.md "Row values"). The column is
// often filled from request data, so it must not be able to impersonate the headers consumers
// trust: `id` (the deduplication id), `type`, and everything under `pgoutbox.` (provenance).
// Such keys are dropped, not renamed: a renamed copy would still be a header the row's author
// chose, and dropping is what a consumer can rely on. The first drop on a table is logged, every
// drop counted (pgoutbox_headers_dropped_total{table}).
//
// The column's headers are also capped, per record: librdkafka's consumer refuses a record with
// more than 100,000 headers (rd_kafka_msg_headers_parse returns BAD_MSG, and clients then see no
// headers at all), and thousands of headers are never intended. Over a cap the row is poison.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pgoutbox::outbox {

// Headers the headers column may add to one record, and their total bytes (names plus values).
inline constexpr std::size_t kMaxColumnHeaders = 64;
inline constexpr std::size_t kMaxColumnHeaderBytes = 64 * 1024;

// `id`, `type` or `pgoutbox.*`, compared without regard to ASCII case (a consumer that
// normalises case must not be fooled either).
bool is_reserved_header(std::string_view name);

// Counts one dropped header for `table` ("schema.name"); logs a warning the first time a table
// drops one. Thread-safe.
void count_dropped_header(const std::string& table, std::string_view name);

// Every table that dropped a header, with its count so far. The tables are the configured ones,
// so the list is bounded by the configuration, never by row values.
std::vector<std::pair<std::string, std::uint64_t>> dropped_header_counts();

}  // namespace pgoutbox::outbox
