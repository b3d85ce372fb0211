#pragma once

// What a record weighs on the wire, and the refusal a topic's limits would give it, known
// before it is sent (docs/spec.md I13): a record that would be refused never enters a batch
// (where its refusal would take the batch's other records with it) or a Kafka transaction
// (which would abort), and costs one poison.policy action instead.

#include <cstddef>
#include <map>
#include <optional>
#include <string>

#include "pgoutbox/kafka/sink.h"
#include "pgoutbox/kafka/topic_limits.h"
#include "pgoutbox/outbox/record.h"

namespace pgoutbox::kafka {

// The size of a record batch holding only `record` (Kafka's v2 format: the batch's header, then
// the record with its varint lengths and headers), its records compressed with librdkafka's
// `compression` codec (compression.type: none, gzip, snappy, lz4, zstd). The codec runs only on a
// record larger than `worth_compressing` (below it the uncompressed size answers the question).
std::size_t batch_bytes(const outbox::Record& record, const std::string& compression,
                        std::size_t worth_compressing = 0);

// The refusal `record` would meet on a topic of `limit`, or nullopt: larger than its
// max.message.bytes even compressed (MSG_SIZE_TOO_LARGE, a size refusal), or without a key on a
// compacted topic (INVALID_RECORD).
std::optional<DeliveryError> predicted_refusal(const outbox::Record& record, const TopicLimit& limit,
                                               const std::string& compression);

// The codec the producer compresses with under these user properties (compression.type or its
// alias compression.codec, else pgoutbox's default).
std::string producer_compression(const std::map<std::string, std::string>& properties);

}  // namespace pgoutbox::kafka
