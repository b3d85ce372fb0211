// Settings that weaken the transport's security (SECURITY.md "Secrets and transport"). None of
// them stops pgoutbox, so each is a warning: `check` prints it with the fix, `run` logs it once
// at start.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <libpq-fe.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

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

// The host of a host:port broker entry: "[::1]:9092" → "::1", "kafka:9092" → "kafka".
std::string broker_host(std::string entry) {
  const auto first = entry.find_first_not_of(' ');
  entry = first == std::string::npos ? std::string() : entry.substr(first, entry.find_last_not_of(' ') - first + 1);
  // librdkafka accepts a protocol prefix (PLAINTEXT://host:port).
  if (const auto scheme = entry.find("://"); scheme != std::string::npos) entry = entry.substr(scheme + 3);
  if (!entry.empty() && entry.front() == '[') {
    const auto close = entry.find(']');
    return entry.substr(1, close == std::string::npos ? std::string::npos : close - 1);
  }
  const auto colon = entry.find(':');
  if (colon != std::string::npos && entry.find(':', colon + 1) == std::string::npos) return entry.substr(0, colon);
  return entry;  // no port, or a bare IPv6 address
}

// localhost, 127.0.0.0/8 and ::1: the only hosts whose traffic never leaves the machine.
bool is_loopback(const std::string& host) {
  const auto h = lower(host);
  if (h == "localhost" || h.ends_with(".localhost") || h == "::1") return true;
  in_addr v4{};
  return inet_pton(AF_INET, h.c_str(), &v4) == 1 && (ntohl(v4.s_addr) >> 24U) == 127U;
}

// The first broker of kafka.brokers that is not on loopback, as written; nullopt when all are.
std::optional<std::string> first_remote_broker(const std::string& brokers) {
  std::size_t start = 0;
  while (start <= brokers.size()) {
    const auto comma = brokers.find(',', start);
    const auto entry = brokers.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (const auto host = broker_host(entry); !host.empty() && !is_loopback(host)) return host;
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return std::nullopt;
}

}  // namespace

std::vector<Finding> check_transport_security(const config::Config& config) {
  std::vector<Finding> findings;
  const auto mode = effective_sslmode(config.postgres.dsn);
  if (mode && (*mode == "disable" || *mode == "allow" || *mode == "prefer")) {
    findings.push_back(Finding::warning(
        "postgres tls",
        fmt::format("sslmode is {}: the connection {} and its server is not verified, so the password and every outbox "
                    "row can be read or altered on the network",
                    *mode, *mode == "disable" ? "is never encrypted" : "may fall back to plaintext"),
        "set sslmode=verify-full (with sslrootcert) in postgres.dsn."));
  } else if (mode && (*mode == "require" || *mode == "verify-ca")) {
    // require checks no certificate (unless a root certificate file happens to exist), verify-ca
    // checks the chain but not the name: either way a server with any certificate the CA signed,
    // or any at all, can stand in for the database.
    findings.push_back(Finding::warning(
        "postgres tls",
        fmt::format("sslmode is {}: the connection is encrypted but the server's {}, so whoever can intercept it can "
                    "impersonate the database and read the password and every outbox row",
                    *mode,
                    *mode == "require" ? "certificate is not verified"
                                       : "host name is not checked against its "
                                         "certificate"),
        "set sslmode=verify-full (with sslrootcert) in postgres.dsn."));
  }
  if (lower(property(config, "enable.ssl.certificate.verification", "true")) == "false") {
    findings.push_back(Finding::warning(
        "kafka tls",
        "enable.ssl.certificate.verification is false: any broker certificate is accepted, so anyone on the "
        "path can impersonate the brokers",
        "remove kafka.properties.enable.ssl.certificate.verification and set ssl.ca.location to the brokers' CA."));
  }
  if (lower(property(config, "ssl.endpoint.identification.algorithm", "https")) == "none") {
    findings.push_back(Finding::warning(
        "kafka tls",
        "ssl.endpoint.identification.algorithm is none: the broker's certificate is not checked against its host "
        "name, so any certificate the CA signed can impersonate the brokers",
        "set kafka.properties.ssl.endpoint.identification.algorithm: https (librdkafka's default), with broker "
        "certificates that name their hosts."));
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
  } else if (protocol == "plaintext" || protocol == "sasl_plaintext") {
    if (const auto remote = first_remote_broker(config.kafka.brokers)) {
      findings.push_back(Finding::warning(
          "kafka tls",
          fmt::format("security.protocol is {} and broker {} is not on loopback: every record crosses the network "
                      "unencrypted, and anyone on the path can read or alter it or pose as the broker",
                      protocol, *remote),
          fmt::format("set kafka.properties.security.protocol: {} with ssl.ca.location.",
                      protocol == "plaintext" ? "SSL (or SASL_SSL)" : "SASL_SSL")));
    }
  }
  for (const auto& warning : config.warnings) {
    findings.push_back(Finding::warning("secret file", warning, "restrict the file's permissions (chmod 600)."));
  }
  return findings;
}

}  // namespace pgoutbox::diagnostics
