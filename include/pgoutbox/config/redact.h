#pragma once

// Secrets are never logged (docs/spec.md "The command line"): everything that prints configuration
// goes through these.

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "pgoutbox/config/config.h"

namespace pgoutbox::config {

inline constexpr std::string_view kRedacted = "********";

// libpq key=value or URI form; the values of password and sslpassword become ********, the rest
// is kept as written. A malformed string is hidden from the point where it stops making sense.
std::string redact_dsn(const std::string& dsn);

// librdkafka properties holding a secret: names containing "password" or "secret", ssl.key.pem
// and sasl.oauthbearer.config.
bool is_secret_property(std::string_view name);
std::map<std::string, std::string> redact_properties(const std::map<std::string, std::string>& properties);

// Every secret value of the configuration, for pgoutbox::remember_secrets: the Postgres password
// from the environment or its file, the DSN's password and sslpassword both as written (a URI's
// percent-escapes kept, as libpq quotes them in its errors) and as libpq reads them, and the value
// of every secret Kafka property.
std::vector<std::string> secrets_of(const Config& config);

// The effective configuration, one "key: value" line per key, secrets redacted (logs, status).
std::string describe(const Config& config);

}  // namespace pgoutbox::config
