#include "pgoutbox/config/transactional_id.h"

#include <fmt/format.h>

namespace pgoutbox::config {

namespace {

std::string without_dashes(std::string_view database) {
  std::string out;
  out.reserve(database.size());
  for (const char c : database) {
    if (c == '%') {
      out += "%25";
    } else if (c == '-') {
      out += "%2D";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string derived_transactional_id(std::string_view system_id, std::string_view database, std::string_view slot) {
  return fmt::format("pgoutbox-{}-{}-{}", system_id, without_dashes(database), slot);
}

std::string legacy_transactional_id(std::string_view system_id, std::string_view database, std::string_view slot) {
  const auto legacy = fmt::format("pgoutbox-{}-{}-{}", system_id, database, slot);
  return legacy == derived_transactional_id(system_id, database, slot) ? std::string() : legacy;
}

std::string alternate_transactional_id(std::string_view id) { return fmt::format("{}{}", id, kAlternateSuffix); }

std::optional<std::string> transactional_id_collision(std::string_view id) {
  if (id.size() > kMaxTransactionalIdBytes) {
    return fmt::format("is {} bytes, longer than the {} a checkpoint may carry", id.size(), kMaxTransactionalIdBytes);
  }
  constexpr std::string_view derived = "pgoutbox-";
  if (id.starts_with(derived) && id.size() > derived.size() && id[derived.size()] >= '0' && id[derived.size()] <= '9') {
    return "begins like the ids pgoutbox derives from a slot (pgoutbox-<system identifier>-…), so it could be "
           "another slot's; leave it empty to use this slot's derived id, or choose one outside that namespace";
  }
  for (const auto suffix : {kAlternateSuffix, kProbeSuffix}) {
    if (id.ends_with(suffix)) {
      return fmt::format(
          "ends with {}, as the id of another configuration's {} does (the id followed by {}), so the two could "
          "fence each other; choose one that does not",
          suffix, suffix == kAlternateSuffix ? "alternate producer" : "`pgoutbox check` probe", suffix);
    }
  }
  return std::nullopt;
}

}  // namespace pgoutbox::config
