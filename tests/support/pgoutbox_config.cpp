#include "pgoutbox_config.h"

#include <fstream>
#include <stdexcept>

namespace pgoutbox::test {

PgoutboxConfig pipeline_config(const std::string& dsn, const std::string& brokers, const std::string& name) {
  PgoutboxConfig c;
  c.dsn = dsn;
  c.slot = name + "_slot";
  c.publication = name + "_pub";
  c.brokers = brokers;
  c.tables.push_back(
      {.table = "public." + name, .topic = name + ".${aggregatetype}", .validate_json = false, .extra_yaml = ""});
  return c;
}

std::string write_pgoutbox_config(const std::string& path, const PgoutboxConfig& config) {
  std::ofstream out(path, std::ios::trunc);
  out << "postgres:\n"
      << "  dsn: \"" << config.dsn << "\"\n"
      << "  slot: " << config.slot << "\n"
      << "  publication: " << config.publication << "\n";
  if (config.create_publication) out << "  create_publication: true\n";
  if (!config.status_interval.empty()) out << "  status_interval: " << config.status_interval << "\n";
  out << "kafka:\n"
      << "  brokers: \"" << config.brokers << "\"\n";
  if (!config.kafka_properties.empty()) {
    out << "  properties:\n";
    for (const auto& [name, value] : config.kafka_properties) out << "    " << name << ": \"" << value << "\"\n";
  }
  out << config.kafka_extra_yaml;
  out << "tables:\n";
  for (const auto& t : config.tables) {
    out << "  - table: " << t.table << "\n";
    if (!t.topic.empty()) out << "    topic: \"" << t.topic << "\"\n";
    if (t.validate_json) out << "    validate_json: true\n";
    out << t.extra_yaml;
  }
  if (!config.metrics_address.empty()) out << "metrics_address: \"" << config.metrics_address << "\"\n";
  if (!config.log_format.empty()) out << "log_format: " << config.log_format << "\n";
  out << config.extra_yaml;
  out.close();
  if (!out) throw std::runtime_error("cannot write " + path);
  return path;
}

}  // namespace pgoutbox::test
