#pragma once

// What a record's delivery report must bring back, packed into librdkafka's 64-bit opaque:
// its transaction (bits 0–47), how many times it was sent alone before (bits 48–61), whether
// it went through the isolated producer (bit 62) and whether it is a dead-letter write
// (bit 63). No per-record allocation, no lookup table.

#include <cstdint>

namespace pgoutbox::relay {

struct DeliveryCookie {
  std::uint64_t txn = 0;
  std::uint32_t attempt = 0;  // isolated sends before this one
  bool dead_letter = false;
  bool isolated = false;  // sent alone (a batch of one), so its verdict is its own

  // A record's first send, in a batch with others.
  static DeliveryCookie batched(std::uint64_t txn) { return {txn, 0, false, false}; }
  // A send alone (a batch of one) after `attempt` earlier sends alone.
  static DeliveryCookie alone(std::uint64_t txn, std::uint32_t attempt) { return {txn, attempt, false, true}; }
  // A write of the record to the dead-letter topic, alone.
  static DeliveryCookie dead_letter_write(std::uint64_t txn) { return {txn, 0, true, true}; }

  // The checkpoint record (docs/spec.md I10): no transaction of the stream is waiting for it.
  static DeliveryCookie checkpoint() { return {kTxnMask, 0, false, false}; }
  bool is_checkpoint() const { return txn == kTxnMask && !dead_letter && !isolated; }

  static constexpr std::uint64_t kTxnMask = (std::uint64_t{1} << 48) - 1;
  static constexpr std::uint32_t kMaxAttempt = (1U << 14) - 1;

  std::uint64_t pack() const {
    return (txn & kTxnMask) | (static_cast<std::uint64_t>(attempt & kMaxAttempt) << 48) |
           (isolated ? std::uint64_t{1} << 62 : 0) | (dead_letter ? std::uint64_t{1} << 63 : 0);
  }
  static DeliveryCookie unpack(std::uint64_t cookie) {
    return {cookie & kTxnMask, static_cast<std::uint32_t>((cookie >> 48) & kMaxAttempt), ((cookie >> 63) & 1) != 0,
            ((cookie >> 62) & 1) != 0};
  }
};

}  // namespace pgoutbox::relay
