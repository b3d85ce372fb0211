#pragma once

// Loads the one YAML configuration file, applies PGOUTBOX_* environment overrides on top, reads
// secret files and validates everything before anything connects (docs/style.md §9).
//
// Environment naming rule: PGOUTBOX_ + the key path upper-cased with '.' written as '_'
// (postgres.dsn -> PGOUTBOX_POSTGRES_DSN); list entries by index (PGOUTBOX_TABLES_0_TOPIC);
// librdkafka properties as PGOUTBOX_KAFKA_PROPERTY_<NAME> with '.' written as '_'
// (PGOUTBOX_KAFKA_PROPERTY_SASL_PASSWORD -> sasl.password).

#include <map>
#include <optional>
#include <stdexcept>
#include <string>

#include "pgoutbox/config/config.h"
#include "pgoutbox/config/schema.h"

namespace pgoutbox::config {

// The variables the loader may read; tests pass their own instead of touching the process's.
class Environment {
 public:
  Environment() = default;
  explicit Environment(std::map<std::string, std::string> variables) : variables_(std::move(variables)) {}
  static Environment from_process();

  std::optional<std::string> get(const std::string& name) const;
  const std::map<std::string, std::string>& variables() const { return variables_; }

 private:
  std::map<std::string, std::string> variables_;
};

// Once a configuration is loaded from this process's environment: removes from it every PGOUTBOX_
// variable that holds a secret (the password, the signing key, a secret librdkafka property, a
// DSN with a password), and overwrites the bytes /proc/<pid>/environ shows, so that no child
// (librdkafka runs sasl.kerberos.kinit.cmd through a shell) inherits one. Variables that hold
// none stay.
void forget_secret_variables();

// What is wrong, where, and what is allowed:
//   config.yaml:12:5: limits.resume_ratio: must be between 0 and 1, both excluded (got 1.5)
//   environment variable PGOUTBOX_LOG_LEVEL: log_level: must be one of trace, debug, ... (got 'loud')
// Secret values never appear in it.
class ConfigError : public std::runtime_error {
 public:
  ConfigError(std::string where, int line, int column, std::string key, std::string problem);

  const std::string& where() const noexcept { return where_; }  // the file, or "environment variable X"
  int line() const noexcept { return line_; }                   // 1-based; 0 when unknown
  int column() const noexcept { return column_; }               // 1-based; 0 when unknown
  const std::string& key() const noexcept { return key_; }      // "tables[1].columns.payload"; may be empty
  const std::string& problem() const noexcept { return problem_; }

 private:
  std::string where_;
  int line_;
  int column_;
  std::string key_;
  std::string problem_;
};

// Relative secret file paths in the file are taken from the file's folder.
Config load(const std::string& path, const Environment& env);

// source_name names the text in messages; relative paths are taken from the working folder.
Config load_string(const std::string& yaml, const std::string& source_name, const Environment& env);

}  // namespace pgoutbox::config
