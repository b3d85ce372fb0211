#pragma once

#include <chrono>
#include <map>
#include <string>

#include "cutover.h"

namespace shop {

// Reads every partition of `topic` from its start to the end it had when reading began
// (read_committed) and counts each `id` header's records by relay (see Copies). Records without
// an id header are counted under the empty id. Throws std::runtime_error on a Kafka error or
// when the end is not reached within `timeout`.
std::map<std::string, Copies> read_copies(const std::string& brokers, const std::string& topic,
                                          std::chrono::milliseconds timeout);

}  // namespace shop
