#include "dead_letter.h"

#include <openssl/sha.h>

#include <array>

#include <fmt/format.h>

namespace pgoutbox::relay {
namespace {

std::string sha256_hex(const std::string& value) {
  std::array<unsigned char, SHA256_DIGEST_LENGTH> digest{};
  SHA256(reinterpret_cast<const unsigned char*>(value.data()), value.size(), digest.data());
  std::string out;
  for (const unsigned char b : digest) out += fmt::format("{:02x}", b);
  return out;
}

}  // namespace

outbox::Record dead_letter_record(const outbox::Record& original, const std::string& dead_letter_topic,
                                  const DeadLetterCause& cause) {
  outbox::Record dlq = original;
  dlq.topic = dead_letter_topic;
  dlq.headers.push_back({"pgoutbox.dlq.error", cause.error});
  dlq.headers.push_back({"pgoutbox.dlq.error.code", cause.error_code});
  dlq.headers.push_back({"pgoutbox.dlq.topic", original.topic});
  if (!original.table.empty()) dlq.headers.push_back({"pgoutbox.dlq.table", original.table});
  dlq.headers.push_back({"pgoutbox.dlq.attempts", std::to_string(cause.attempts)});
  dlq.headers.push_back({"pgoutbox.dlq.lsn", cause.lsn.to_string()});
  if (cause.without_value) {
    dlq.value.clear();
    dlq.headers.push_back({"pgoutbox.dlq.value.size", std::to_string(original.value.size())});
    dlq.headers.push_back({"pgoutbox.dlq.value.sha256", sha256_hex(original.value)});
  }
  return dlq;
}

DeadLetterSource dead_letter_source(const outbox::Record& dead_letter) {
  DeadLetterSource source;
  for (const auto& h : dead_letter.headers) {
    if (h.name == "pgoutbox.dlq.table") source.table = h.value;
    if (h.name == "pgoutbox.dlq.topic") source.topic = h.value;
  }
  return source;
}

}  // namespace pgoutbox::relay
