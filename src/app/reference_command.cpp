#include "operator_commands.h"
#include "pgoutbox/config/schema.h"

namespace pgoutbox::app {

std::string configuration_reference() {
  // The guide's navigation line, the same on every page of docs/ (docs_guide_test checks it).
  return "# Configuration reference\n\n"
         "Guide: [map](index.md) · [getting started](getting-started.md) · "
         "[configuration](configuration.md) · [delivery](delivery.md) · [outbox layouts](outbox-layouts.md) · "
         "[operating](operating.md) · [runbook](runbook.md) · [migrating](migrating.md) · "
         "[security](security.md) · [versions](versions.md) · [Kubernetes](kubernetes.md) · "
         "[fault suite](fault-suite.md) · [benchmarks](benchmarks.md) · [architecture](architecture.md) · "
         "[spec](spec.md)\n\n"
         "<!-- Generated from the configuration schema (pgoutbox::config::schema()); do not edit by hand.\n"
         "     Regenerate with: build/release/src/app/pgoutbox config-reference > docs/configuration.md\n"
         "     The test app_config_reference_test fails when this file and the schema differ. -->\n\n"
         "One YAML file configures pgoutbox (`pgoutbox run -c FILE`); `config/pgoutbox.example.yaml` shows every key "
         "with a comment.\n\n" +
         config::reference_markdown();
}

}  // namespace pgoutbox::app
