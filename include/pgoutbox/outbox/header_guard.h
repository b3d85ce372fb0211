#pragma once

// What a row's headers column may add to a record (SECURITY.md "Row values"). The column is
// often filled from request data, so it must not be able to impersonate the headers consumers
// trust: `id` (the deduplication id), `type`, and everything under `pgoutbox.` (provenance).
// Such keys are dropped, not renamed: a renamed copy would still be a header the row's author
// chose, and dropping is what a consumer can rely on. The first drop on a table is logged, every
// drop counted (pgoutbox_headers_dropped_total{table}).
//
// A name with a NUL byte is dropped the same way: Kafka carries names with a length, but a
// client that reads them as C strings sees only the part before the NUL ("id\0x" reads as `id`),
// and librdkafka's own rd_kafka_header_get_all is one (pgoutbox rebuilds a record from it after a
// failed delivery). A NUL byte in a value makes the row poison instead (INVALID_HEADERS): the
// name is one the application chose, and a value that reads differently to different consumers
// is neither one to send nor one to drop unseen. Postgres text cannot hold a NUL; a `json`
// column (jsonb refuses "\u0000") or a message envelope can.
//
// The column's headers are also capped, per record: librdkafka's consumer refuses a record with
// more than 100,000 headers (rd_kafka_msg_headers_parse returns BAD_MSG, and clients then see no
// headers at all), and thousands of headers are never intended. Over a cap the row is poison.
// The column's JSON text is capped too, before it is parsed: simdjson's parser takes about 13
// bytes per byte of input and keeps that capacity, so one 300 MB value used to get the relay
// OOM-killed, and the row came again on every restart.

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
// The headers column's JSON text: room for any headers within the caps above, however escaped
// (at most 6 bytes of text per byte, "\u0001") and punctuated. Above it the row is poison
// TOO_MANY_HEADERS, and the text is never parsed.
inline constexpr std::size_t kMaxColumnHeadersTextBytes = 8 * kMaxColumnHeaderBytes;

// `id`, `type` or `pgoutbox.*`, compared without regard to ASCII case (a consumer that
// normalises case must not be fooled either), or any name with a NUL byte.
bool is_reserved_header(std::string_view name);

inline bool has_nul(std::string_view text) { return text.find('\0') != std::string_view::npos; }

// Counts one dropped header for `table` ("schema.name"); logs a warning the first time a table
// drops one. Thread-safe.
void count_dropped_header(const std::string& table, std::string_view name);

// Every table that dropped a header, with its count so far. The tables are the configured ones,
// so the list is bounded by the configuration, never by row values.
std::vector<std::pair<std::string, std::uint64_t>> dropped_header_counts();

}  // namespace pgoutbox::outbox
