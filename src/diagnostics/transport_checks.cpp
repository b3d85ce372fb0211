// Settings that weaken the transport's security (SECURITY.md "Secrets and transport"). None of
// them stops pgoutbox, so each is a warning: `check` prints it with the fix, `run` logs it once
// at start.
#include <fmt/format.h>
#include <libpq-fe.h>

#include <algorithm>
#include <cstdlib>
#include <memory>

#include "pgoutbox/diagnostics/preflight.h"

namespace pgoutbox::diagnostics {
namespace {

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

std::string property(const config::Config& config, const std::string& name, const std::string& fallback = {}) {
  const auto it = config.kafka.properties.find(name);
  return it == config.kafka.properties.end() ? fallback : it->second;
}

// The sslmode libpq would use for this DSN (the DSN's, else PGSSLMODE, else libpq's default
// prefer), or nullopt when every host is a Unix-domain socket (TLS does not apply there).
std::optional<std::string> effective_sslmode(const std::string& dsn) {
  char* error = nullptr;
  std::unique_ptr<PQconninfoOption, decltype(&PQconninfoFree)> options(PQconninfoParse(dsn.c_str(), &error),
                                                                       &PQconninfoFree);
  if (error != nullptr) PQfreemem(error);
  if (!options) return std::nullopt;  // the loader and the connection report a malformed DSN
  std::string sslmode, host, hostaddr;
  for (auto* o = options.get(); o->keyword != nullptr; ++o) {
    const std::string keyword = o->keyword;
    const std::string value = o->val != nullptr ? o->val : "";
    if (keyword == "sslmode") sslmode = value;
    if (keyword == "host") host = value;
    if (keyword == "hostaddr") hostaddr = value;
  }
  if (host.empty()) {
    if (const char* env = std::getenv("PGHOST")) host = env;
  }
  // No host means libpq's default Unix-domain socket; a host starting with '/' or '@' is one.
  const bool socket_only = hostaddr.empty() && (host.empty() || host.front() == '/' || host.front() == '@');
  if (socket_only) return std::nullopt;
  if (sslmode.empty()) {
    const char* env = std::getenv("PGSSLMODE");
    sslmode = env != nullptr && *env != '\0' ? env : "prefer";
  }
  return sslmode;
}

}  // namespace

std::vector<Finding> check_transport_security(const config::Config& config) {
  std::vector<Finding> findings;
  if (const auto mode = effective_sslmode(config.postgres.dsn);
      mode && (*mode == "disable" || *mode == "allow" || *mode == "prefer")) {
    findings.push_back(Finding::warning(
        "postgres tls",
        fmt::format("sslmode is {}: the connection {} and its server is not verified, so the password and every outbox "
                    "row can be read or altered on the network",
                    *mode, *mode == "disable" ? "is never encrypted" : "may fall back to plaintext"),
        "set sslmode=verify-full (with sslrootcert) in postgres.dsn, or at least sslmode=require."));
  }
  if (lower(property(config, "enable.ssl.certificate.verification", "true")) == "false") {
    findings.push_back(Finding::warning(
        "kafka tls",
        "enable.ssl.certificate.verification is false: any broker certificate is accepted, so anyone on the "
        "path can impersonate the brokers",
        "remove kafka.properties.enable.ssl.certificate.verification and set ssl.ca.location to the brokers' CA."));
  }
  const auto protocol = lower(property(config, "security.protocol", "plaintext"));
  const bool has_sasl_password = !property(config, "sasl.password").empty();
  if (has_sasl_password && (protocol == "plaintext" || protocol == "sasl_plaintext")) {
    findings.push_back(Finding::warning(
        "kafka tls",
        fmt::format(
            "a SASL password is set but security.protocol is {}: the credentials{} cross the network unencrypted",
            protocol,
            lower(property(config, "sasl.mechanism", property(config, "sasl.mechanisms", "GSSAPI"))) == "plain"
                ? " (SASL/PLAIN: the password itself)"
                : ""),
        "set kafka.properties.security.protocol: SASL_SSL."));
  }
  for (const auto& warning : config.warnings) {
    findings.push_back(Finding::warning("secret file", warning, "restrict the file's permissions (chmod 600)."));
  }
  return findings;
}

}  // namespace pgoutbox::diagnostics
