#include "operator_commands.h"
#include "pgoutbox/config/schema.h"

namespace pgoutbox::app {

std::string configuration_reference() {
  return "# Configuration reference\n\n"
         "<!-- Generated from the configuration schema (pgoutbox::config::schema()); do not edit by hand.\n"
         "     Regenerate with: build/release/src/app/pgoutbox config-reference > docs/configuration.md\n"
         "     The test app_config_reference_test fails when this file and the schema differ. -->\n\n"
         "One YAML file configures pgoutbox (`pgoutbox run -c FILE`); `config/pgoutbox.example.yaml` shows every key "
         "with a comment.\n\n" +
         config::reference_markdown();
}

}  // namespace pgoutbox::app
