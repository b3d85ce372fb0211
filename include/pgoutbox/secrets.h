#pragma once

// The secrets this process was configured with (the Postgres password, as given and as written in
// the DSN, and Kafka's secret properties), remembered once the configuration has loaded, so that
// any text pgoutbox prints can be cleared of them wherever they appear. libpq and librdkafka quote
// parts of their input in their errors in forms no pattern foresees: a URI whose password holds a
// bad percent-escape makes libpq say `invalid percent-encoded token: "<password>"`
// (SECURITY.md "Secrets and transport"). Every libpq and librdkafka message passes through
// redact_secrets() before it is logged or put into an exception; the log formatter applies it to
// every line as well.

#include <string>
#include <string_view>
#include <vector>

namespace pgoutbox {

inline constexpr std::string_view kRedactedSecret = "********";

// A value shorter than this is not remembered: hiding every "ab" in every message would make
// the logs unreadable, and a secret that short protects nothing.
inline constexpr std::size_t kMinSecretBytes = 4;

// Adds to the process's secrets; thread-safe, and remembered until the process ends.
void remember_secrets(const std::vector<std::string>& secrets);

// `text` with each remembered secret replaced by ******** wherever it occurs (longest first, so
// that a secret containing another is hidden whole). Thread-safe: librdkafka calls back on its
// own threads.
std::string redact_secrets(std::string_view text);

// Forgets every secret; for tests.
void forget_secrets();

}  // namespace pgoutbox
