// The Helm chart (deploy/helm/pgoutbox) through scripts/helm-chart.sh: helm lint --strict, helm
// template, every manifest decoded strictly into its Kubernetes API type, and every rendered
// configuration loaded by this build's `pgoutbox config validate`, for each value set in the
// chart's ci/ folder; each set in ci/invalid/ refused. Then proof that each layer can fail: a
// misspelt field the schema lets through, a configuration only pgoutbox's loader refuses, and
// alert rules that drifted from the chart's copy.
#include <gtest/gtest.h>

#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "child_process.h"
#include "command.h"

namespace pgoutbox::test {
namespace {

const std::string kRoot = PGOUTBOX_SOURCE_DIR;

CommandResult chart(const std::string& args = "") {
  return run_command("bash " + kRoot + "/scripts/helm-chart.sh " + PGOUTBOX_BINARY + " " + args);
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

class HelmChart : public ::testing::Test {
 protected:
  std::string write(const std::string& name, const std::string& text) { return write_file(dir_.path(), name, text); }
  ScratchDir dir_{"helm", std::nullopt};
};

TEST_F(HelmChart, EveryValueSetLintsRendersDecodesStrictlyAndLoads) {
  const auto r = chart();
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(has(r.output, " 0 failed")) << r.output;
  // The three value sets the issue names, each through every layer.
  for (const std::string set : {"default", "tls-sasl", "many-slots"}) {
    EXPECT_TRUE(
        has(r.output, "ok    helm lint --strict -f " + kRoot + "/deploy/helm/pgoutbox/ci/" + set + "-values.yaml"))
        << set << "\n"
        << r.output;
  }
  EXPECT_TRUE(has(r.output, "valid: slot orders_outbox")) << r.output;
  EXPECT_TRUE(has(r.output, "valid: slot inventory_v2")) << r.output;
  EXPECT_TRUE(has(r.output, "1 PrometheusRule")) << r.output;
  EXPECT_TRUE(has(r.output, "ok    refused: ")) << r.output;
  std::cout << r.output;
}

// The image the chart runs by default is this build's version.
TEST_F(HelmChart, TheChartsAppVersionIsTheProjectsVersion) {
  const auto chart_yaml = file_text(kRoot + "/deploy/helm/pgoutbox/Chart.yaml");
  EXPECT_TRUE(has(chart_yaml, std::string("\nappVersion: \"") + PGOUTBOX_VERSION + "\"\n")) << chart_yaml;
}

// extraEnv's items are free-form in values.schema.json: only the strict decode catches `valu`.
TEST_F(HelmChart, AMisspeltFieldFailsTheStrictDecode) {
  const auto values = write("misspelt.yaml", "extraEnv:\n  - name: PGOUTBOX_LOG_LEVEL\n    valu: debug\n");
  const auto r = chart("-values " + values);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_TRUE(has(r.output, "unknown field \"spec.template.spec.containers[0].env[0].valu\"")) << r.output;
}

// The schema checks shapes; a reconnect.min above reconnect.max is pgoutbox's own rule.
TEST_F(HelmChart, AConfigurationOnlyTheLoaderRefusesFails) {
  const auto values = write("loader.yaml", "config:\n  reconnect:\n    min: 1m\n    max: 1s\n");
  const auto r = chart("-values " + values);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_TRUE(has(r.output, "FAIL  " + values + ": pgoutbox config validate")) << r.output;
  EXPECT_TRUE(has(r.output, "reconnect")) << r.output;
}

// A password in either DSN would be rendered into the ConfigMap, readable by whoever may read
// ConfigMaps in the namespace, before pgoutbox refused it at start: the schema refuses it at
// `helm install`, in each form libpq reads one; a DSN without one still renders.
TEST_F(HelmChart, APasswordInADsnIsRefusedBeforeItReachesAConfigMap) {
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"config:\n  postgres:\n    dsn: \"host=db user=pgoutbox password=hunter2\"\n", "at '/config/postgres/dsn'"},
      {"config:\n  postgres:\n    dsn: \"password = 'hunter 2' host=db\"\n", "at '/config/postgres/dsn'"},
      {"config:\n  postgres:\n    dsn: \"postgresql://pgoutbox:hunter2@db/app\"\n", "at '/config/postgres/dsn'"},
      {"config:\n  postgres:\n    dsn: \"postgres://pgoutbox@db/app?sslmode=require&password=hunter2\"\n",
       "at '/config/postgres/dsn'"},
      {"config:\n  postgres:\n    primary_dsn: \"host=primary sslkey=/k sslpassword=hunter2\"\n",
       "at '/config/postgres/primary_dsn'"},
      {"relays:\n  - slot: orders\n    config:\n      postgres:\n        dsn: \"host=db password=hunter2\"\n",
       "at '/relays/0/config/postgres/dsn'"},
  };
  for (std::size_t i = 0; i < refused.size(); ++i) {
    const auto& [values, expect] = refused[i];
    const auto r = chart("-values " + write("dsn-" + std::to_string(i) + ".yaml", values));
    EXPECT_EQ(r.status, 1) << values << r.output;
    EXPECT_TRUE(has(r.output, expect)) << values << r.output;
    EXPECT_FALSE(has(r.output, "ok    helm template")) << "rendered:\n" << values << r.output;
  }
  const auto kept = chart("-values " + write("dsn-kept.yaml",
                                             "config:\n  postgres:\n    dsn: \"host=db dbname=passwords "
                                             "user=pgoutbox passfile=/nonexistent\"\n    primary_dsn: "
                                             "\"postgresql://pgoutbox@primary:5432/app?sslmode=verify-full\"\n"));
  EXPECT_EQ(kept.status, 0) << kept.output;
}

// extraEnv renders into the Deployment's spec, which more people and tools read than Secrets: a
// variable that holds a secret must come from a Secret (valueFrom), and a DSN given whole in
// PGOUTBOX_POSTGRES_DSN (where pgoutbox accepts a password) may have none in a plain value.
TEST_F(HelmChart, ASecretsVariableInExtraEnvMustComeFromASecret) {
  for (const std::string variable :
       {"PGOUTBOX_POSTGRES_PASSWORD", "PGOUTBOX_KAFKA_PROPERTY_SASL_PASSWORD", "PGOUTBOX_CHECKPOINT_SIGNING_KEY",
        "PGOUTBOX_KAFKA_PROPERTY_SASL_OAUTHBEARER_CLIENT_SECRET", "PGOUTBOX_KAFKA_PROPERTY_SSL_KEY_PEM",
        "PGOUTBOX_KAFKA_PROPERTY_SASL_OAUTHBEARER_CONFIG", "PGPASSWORD"}) {
    const auto r = chart("-values " + write(variable + ".yaml",
                                            "extraEnv:\n  - name: PGOUTBOX_LOG_LEVEL\n    "
                                            "value: debug\n  - name: " +
                                                variable + "\n    value: hunter2\n"));
    EXPECT_EQ(r.status, 1) << variable << "\n" << r.output;
    EXPECT_TRUE(has(r.output, "at '/extraEnv/1'")) << variable << "\n" << r.output;
  }
  for (const std::string dsn : {"host=db password=hunter2", "postgresql://pgoutbox:hunter2@db/app"}) {
    for (const std::string variable : {"PGOUTBOX_POSTGRES_DSN", "PGOUTBOX_POSTGRES_PRIMARY_DSN"}) {
      const auto r = chart(
          "-values " + write("env-dsn.yaml", "extraEnv:\n  - name: " + variable + "\n    value: \"" + dsn + "\"\n"));
      EXPECT_EQ(r.status, 1) << variable << "=" << dsn << "\n" << r.output;
      EXPECT_TRUE(has(r.output, "at '/extraEnv/0")) << variable << "=" << dsn << "\n" << r.output;
    }
  }
  // From a Secret; a plain DSN without a password; a secret file's path.
  const auto kept = chart("-values " + write("env-kept.yaml",
                                             "extraEnv:\n"
                                             "  - name: PGOUTBOX_POSTGRES_PASSWORD\n"
                                             "    valueFrom:\n      secretKeyRef: {name: pg, key: password}\n"
                                             "  - name: PGOUTBOX_POSTGRES_DSN\n"
                                             "    value: \"host=db dbname=app user=pgoutbox\"\n"));
  EXPECT_EQ(kept.status, 0) << kept.output;
  const auto path = chart("-values " + write("env-file.yaml",
                                             "extraEnv:\n  - name: PGOUTBOX_KAFKA_PROPERTY_SASL_PASSWORD_FILE\n"
                                             "    value: /etc/pgoutbox/secrets/kafka/password\n"));
  EXPECT_FALSE(has(path.output, "at '/extraEnv")) << path.output;
}

// The chart's defaults render a NetworkPolicy: in to the relays' pods only on the metrics port,
// and only from pods labelled as Prometheus (the kubelet's probes come from the node, which
// NetworkPolicy does not filter).
TEST_F(HelmChart, TheDefaultsAdmitOnlyTheMetricsScraper) {
  const auto r = chart("-values " + kRoot + "/deploy/helm/pgoutbox/ci/default-values.yaml");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(has(r.output, "1 NetworkPolicy")) << r.output;
  EXPECT_TRUE(has(r.output, "ok    " + kRoot +
                                "/deploy/helm/pgoutbox/ci/default-values.yaml: NetworkPolicy pgoutbox admits only "
                                "the metrics port of every relay's pods, from [pods app.kubernetes.io/name=prometheus "
                                "in every namespace]"))
      << r.output;
}

TEST_F(HelmChart, AlertRulesThatDriftedFromTheChartsCopyFail) {
  const auto alerts = write("alerts.yaml", file_text(kRoot + "/deploy/prometheus/alerts.yaml") + "# one more line\n");
  const auto r = chart("-alerts " + alerts + " -values " + kRoot + "/deploy/helm/pgoutbox/ci/tls-sasl-values.yaml");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_TRUE(has(r.output, "FAIL  files/alerts.yaml is " + alerts)) << r.output;
}

}  // namespace
}  // namespace pgoutbox::test
