#pragma once

// Exactly-once's transactional ids (docs/delivery.md "Transactional ids"). Every instance of
// one slot uses the same ids, so that a standby that takes over fences the instance it replaces;
// no two slots may share one, or they fence each other forever. An id is kafka.transactional_id
// or, when that is empty, derived from the slot; each instance also uses (or at least fences) the
// id followed by "-alt" (kafka.alternate_producers).
//
// A derived id is pgoutbox-<system identifier>-<database>-<slot>, where the database name has
// '%' and '-' percent-encoded: a system identifier is digits and a slot name is lower-case
// letters, digits and '_', so a derived id has exactly three '-' and its alternate four, and no
// two (system, database, slot) share either (unencoded, database "shop" with slot "foo" had the
// alternate id of database "shop-foo" with slot "alt"). An explicit id may not take a place
// of that namespace or be another's alternate or probe: load refuses one that begins with
// pgoutbox- and a digit, or ends with -alt or -check (`check`'s probe, diagnostics/transaction_rate.h).

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace pgoutbox::config {

inline constexpr std::string_view kAlternateSuffix = "-alt";
inline constexpr std::string_view kProbeSuffix = "-check";

std::string derived_transactional_id(std::string_view system_id, std::string_view database, std::string_view slot);
// What earlier versions derived (the database name as it is): where it differs from
// derived_transactional_id (a database name with '-' or '%'), checkpoints written with it are
// still this slot's (relay/checkpoint_trust.h); empty where it does not differ.
std::string legacy_transactional_id(std::string_view system_id, std::string_view database, std::string_view slot);
std::string alternate_transactional_id(std::string_view id);
// An explicit id is at most this long: it goes into every checkpoint, and the checkpoint reader
// decodes no record over kafka::kMaxCheckpointBytes (8 KiB), which an id of this length cannot
// reach even with every byte JSON-escaped.
inline constexpr std::size_t kMaxTransactionalIdBytes = 1024;
// Why an explicit kafka.transactional_id is refused: it could be another's id, or it is longer
// than kMaxTransactionalIdBytes; nullopt when neither.
std::optional<std::string> transactional_id_collision(std::string_view id);

}  // namespace pgoutbox::config
