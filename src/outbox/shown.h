#pragma once

// How a poison reason quotes a value that came from a row or a message (SECURITY.md "Row
// values"): the table mapping and the message outbox quote alike.

#include <string>
#include <string_view>

namespace pgoutbox::outbox::detail {

// At most 64 bytes of `value`, every byte outside printable ASCII (and '"', '\') as \xNN, so that
// reasons (logged, and sent as dead-letter headers) stay short and carry no control character.
std::string shown(std::string_view value);

}  // namespace pgoutbox::outbox::detail
