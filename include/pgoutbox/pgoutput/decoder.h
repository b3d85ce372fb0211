#pragma once

// decode(): one pgoutput message (the payload of one XLogData 'w' CopyData) to a typed value.
// A pure function: no state, no allocation beyond the message's own vectors, every read
// bounds-checked. Truncated, oversized or unknown input is a DecodeError naming the message
// kind and the byte offset — never undefined behaviour.

#include <cstddef>
#include <span>
#include <string>
#include <variant>

#include "pgoutbox/pgoutput/messages.h"

namespace pgoutbox::pgoutput {

struct DecodeOptions {
  // Inside a Stream Start…Stop block, R/Y/I/U/D/T/M carry the (sub)transaction's xid first.
  bool in_stream = false;
  // Stream Abort carries abort_lsn and abort_time only with streaming = parallel (protocol 4).
  bool parallel_streaming = false;
};

struct DecodeError {
  char kind = 0;           // the message's type byte (0 for empty input)
  std::size_t offset = 0;  // where decoding stopped
  std::string reason;      // e.g. "truncated Int64 commit_lsn", "unknown message type"

  // "pgoutput 'C' (Commit) at offset 2: truncated Int64 commit_lsn" — the offset is where
  // the failing field starts.
  std::string to_string() const;
};

class DecodeResult {
 public:
  DecodeResult(Message message) : value_(std::move(message)) {}  // NOLINT: implicit by design
  DecodeResult(DecodeError error) : value_(std::move(error)) {}  // NOLINT

  bool ok() const { return std::holds_alternative<Message>(value_); }
  explicit operator bool() const { return ok(); }
  const Message& message() const { return std::get<Message>(value_); }
  Message& message() { return std::get<Message>(value_); }
  const DecodeError& error() const { return std::get<DecodeError>(value_); }

 private:
  std::variant<Message, DecodeError> value_;
};

DecodeResult decode(std::span<const std::byte> bytes, const DecodeOptions& options = {});

// The message kind's name for logs ("Begin", "Insert", …); "unknown" for others.
const char* kind_name(char type_byte);

}  // namespace pgoutbox::pgoutput
