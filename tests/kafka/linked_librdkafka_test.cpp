// The librdkafka pgoutbox runs with is the one scripts/setup.sh built from Debian's source package
// (third_party/librdkafka/source.env), linked statically, and it carries what users' clusters need:
// SCRAM (with the fix Kafka 4.x needs, librdkafka 2.6.1), OAUTHBEARER with OIDC (libcurl), TLS,
// GSSAPI, and the zstd and lz4 codecs.
#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>

#include <memory>
#include <string>

namespace {

TEST(LinkedLibrdkafka, IsTheVersionSetupBuilt) {
  // "2.8.0-1": the upstream version is what precedes Debian's revision.
  std::string upstream = PGOUTBOX_RDKAFKA_SOURCE_VERSION;
  upstream = upstream.substr(0, upstream.find('-'));
  EXPECT_EQ(std::string(rd_kafka_version_str()), upstream);
  EXPECT_GE(rd_kafka_version(), 0x020601ff) << "SCRAM against Kafka 4.x needs librdkafka 2.6.1";
}

TEST(LinkedLibrdkafka, HasTheFeaturesUsersNeed) {
  const std::unique_ptr<rd_kafka_conf_t, decltype(&rd_kafka_conf_destroy)> conf(rd_kafka_conf_new(),
                                                                                &rd_kafka_conf_destroy);
  char features[512];
  size_t size = sizeof features;
  ASSERT_EQ(rd_kafka_conf_get(conf.get(), "builtin.features", features, &size), RD_KAFKA_CONF_OK);
  const std::string list = std::string(",") + features + ",";
  for (const char* feature :
       {"ssl", "sasl_scram", "sasl_plain", "sasl_gssapi", "sasl_oauthbearer", "http", "oidc", "zstd", "lz4", "gzip"}) {
    EXPECT_NE(list.find(std::string(",") + feature + ","), std::string::npos) << feature << " missing: " << features;
  }
  // OIDC properties are accepted (a build without libcurl refuses them as unsupported).
  char err[512];
  EXPECT_EQ(rd_kafka_conf_set(conf.get(), "sasl.oauthbearer.method", "oidc", err, sizeof err), RD_KAFKA_CONF_OK) << err;
}

}  // namespace
