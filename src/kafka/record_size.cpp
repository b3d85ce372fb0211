#include "pgoutbox/kafka/record_size.h"

#include <lz4frame.h>
#include <zlib.h>
#include <zstd.h>

#include <cstdint>

#include <fmt/format.h>

#include "pgoutbox/kafka/producer.h"

namespace pgoutbox::kafka {
namespace {

// A record batch's header: base offset, length, leader epoch, magic, CRC, attributes, last
// offset delta, first and max timestamps, producer id and epoch, base sequence, record count.
constexpr std::size_t kBatchHeader = 61;
// gzip's header and trailer around zlib's deflate stream.
constexpr std::size_t kGzipFraming = 18;

std::size_t varint_size(std::int64_t value) {
  auto zigzag = (static_cast<std::uint64_t>(value) << 1U) ^ static_cast<std::uint64_t>(value >> 63);
  std::size_t n = 1;
  while (zigzag >= 0x80U) {
    zigzag >>= 7U;
    ++n;
  }
  return n;
}

void put_varint(std::string& out, std::int64_t value) {
  auto zigzag = (static_cast<std::uint64_t>(value) << 1U) ^ static_cast<std::uint64_t>(value >> 63);
  while (zigzag >= 0x80U) {
    out.push_back(static_cast<char>((zigzag & 0x7FU) | 0x80U));
    zigzag >>= 7U;
  }
  out.push_back(static_cast<char>(zigzag));
}

void put_bytes(std::string& out, const std::string* bytes) {
  if (bytes == nullptr) {
    put_varint(out, -1);
    return;
  }
  put_varint(out, static_cast<std::int64_t>(bytes->size()));
  out += *bytes;
}

// The record as the batch holds it (offset and timestamp deltas 0: it is the batch's only one).
std::string encoded(const outbox::Record& record) {
  std::string body;
  body.push_back(0);  // attributes
  put_varint(body, 0);
  put_varint(body, 0);
  put_bytes(body, record.key ? &*record.key : nullptr);
  put_bytes(body, record.tombstone ? nullptr : &record.value);
  put_varint(body, static_cast<std::int64_t>(record.headers.size()));
  for (const auto& h : record.headers) {
    put_bytes(body, &h.name);
    put_bytes(body, &h.value);
  }
  std::string out;
  out.reserve(body.size() + 5);
  put_varint(out, static_cast<std::int64_t>(body.size()));
  return out + body;
}

std::size_t encoded_size(const outbox::Record& record) {
  std::size_t body = 1 + 2;  // attributes, the two deltas
  body += record.key ? varint_size(static_cast<std::int64_t>(record.key->size())) + record.key->size() : 1;
  body += record.tombstone ? 1 : varint_size(static_cast<std::int64_t>(record.value.size())) + record.value.size();
  body += varint_size(static_cast<std::int64_t>(record.headers.size()));
  for (const auto& h : record.headers) {
    body += varint_size(static_cast<std::int64_t>(h.name.size())) + h.name.size();
    body += varint_size(static_cast<std::int64_t>(h.value.size())) + h.value.size();
  }
  return varint_size(static_cast<std::int64_t>(body)) + body;
}

// What the codec makes of `bytes`; its input's size for a codec not known here (snappy).
std::size_t compressed_size(const std::string& bytes, const std::string& codec) {
  if (codec == "lz4") {
    std::string out(LZ4F_compressFrameBound(bytes.size(), nullptr), '\0');
    const auto n = LZ4F_compressFrame(out.data(), out.size(), bytes.data(), bytes.size(), nullptr);
    return LZ4F_isError(n) ? bytes.size() : n;
  }
  if (codec == "zstd") {
    std::string out(ZSTD_compressBound(bytes.size()), '\0');
    const auto n = ZSTD_compress(out.data(), out.size(), bytes.data(), bytes.size(), ZSTD_CLEVEL_DEFAULT);
    return ZSTD_isError(n) ? bytes.size() : n;
  }
  if (codec == "gzip") {
    uLongf n = compressBound(static_cast<uLong>(bytes.size()));
    std::string out(n, '\0');
    if (compress2(reinterpret_cast<Bytef*>(out.data()), &n, reinterpret_cast<const Bytef*>(bytes.data()),
                  static_cast<uLong>(bytes.size()), Z_DEFAULT_COMPRESSION) != Z_OK) {
      return bytes.size();
    }
    return n + kGzipFraming;
  }
  return bytes.size();
}

}  // namespace

std::size_t batch_bytes(const outbox::Record& record, const std::string& compression, std::size_t worth_compressing) {
  const auto plain = encoded_size(record);
  if (compression == "none" || compression.empty() || kBatchHeader + plain <= worth_compressing) {
    return kBatchHeader + plain;
  }
  return kBatchHeader + std::min(plain, compressed_size(encoded(record), compression));
}

std::optional<DeliveryError> predicted_refusal(const outbox::Record& record, const TopicLimit& limit,
                                               const std::string& compression) {
  if (limit.compacted && !record.key) {
    return DeliveryError{.kind = DeliveryFailure::permanent,
                         .code = "INVALID_RECORD",
                         .text = fmt::format("the record has no key, and topic {} is compacted (cleanup.policy "
                                             "compact): Kafka refuses a record without a key there",
                                             record.topic),
                         .size_refusal = false};
  }
  const auto bytes = batch_bytes(record, compression, limit.max_message_bytes);
  if (bytes <= limit.max_message_bytes) return std::nullopt;
  return DeliveryError{
      .kind = DeliveryFailure::permanent,
      .code = "MSG_SIZE_TOO_LARGE",
      .text = fmt::format("the record takes {} bytes in a batch of its own{}, above topic {}'s max.message.bytes ({}); "
                          "refused before it was sent",
                          bytes, compression == "none" ? "" : fmt::format(" ({}-compressed)", compression),
                          record.topic, limit.max_message_bytes),
      .size_refusal = true};
}

std::string producer_compression(const std::map<std::string, std::string>& properties) {
  ProducerSettings settings;
  settings.properties = properties;
  std::map<std::string, std::string> effective;
  try {
    effective = effective_properties(settings);
  } catch (const std::invalid_argument&) {
    effective = properties;  // the producer refuses them: nothing is sent anyway
  }
  for (const char* name : {"compression.type", "compression.codec"}) {
    if (const auto it = properties.find(name); it != properties.end()) return it->second;
  }
  const auto it = effective.find("compression.type");
  return it == effective.end() ? "none" : it->second;
}

}  // namespace pgoutbox::kafka
