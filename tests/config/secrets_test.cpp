// Secrets: the Postgres password and secret librdkafka properties from the environment or from
// files, and the conflicts between the ways of giving them.

#include <gtest/gtest.h>

#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>

#include "config_test_util.h"

namespace pgoutbox::config {
namespace {

using test::error_of;
using test::kMinimal;
using test::load_yaml;
using test::ScratchDir;
using test::Vars;

TEST(ConfigSecrets, PostgresPasswordFromTheEnvironment) {
  const Config c = load_yaml(kMinimal, {{"PGOUTBOX_POSTGRES_PASSWORD", "pg-secret null"}});
  EXPECT_EQ(c.postgres.password, "pg-secret null");
  EXPECT_EQ(load_yaml(kMinimal, {{"PGOUTBOX_POSTGRES_PASSWORD", "null"}}).postgres.password, "null")
      << "secrets are taken verbatim";
}

TEST(ConfigSecrets, PostgresPasswordFromAFile) {
  ScratchDir dir;
  for (const std::string content : {"pg-secret", "pg-secret\n", "pg-secret\r\n", "pg-secret\n\n"}) {
    const std::string path = dir.write("pg", content);
    const Config c = load_yaml("postgres:\n  dsn: host=db\n  password_file: " + path +
                               "\nkafka: {brokers: k}\ntables: [{table: t}]\n");
    EXPECT_EQ(c.postgres.password, "pg-secret");
  }
}

TEST(ConfigSecrets, PostgresPasswordFileIsRelativeToTheConfigFile) {
  ScratchDir dir;
  dir.write("pg-password", "from-file\n");
  const std::string config = dir.write(
      "pgoutbox.yaml",
      "postgres:\n  dsn: host=db\n  password_file: pg-password\nkafka: {brokers: k}\ntables: [{table: outbox}]\n");
  EXPECT_EQ(load(config, Environment{}).postgres.password, "from-file");
}

TEST(ConfigSecrets, PostgresPasswordFileFromTheEnvironment) {
  ScratchDir dir;
  const std::string path = dir.write("pg", "env-file-secret\n");
  EXPECT_EQ(load_yaml(kMinimal, {{"PGOUTBOX_POSTGRES_PASSWORD_FILE", path}}).postgres.password, "env-file-secret");
}

TEST(ConfigSecrets, EnvironmentPasswordWinsOverTheConfiguredFile) {
  const Config c = load_yaml(
      "postgres:\n  dsn: host=db\n  password_file: /nonexistent/pg\nkafka: {brokers: k}\ntables: [{table: t}]\n",
      {{"PGOUTBOX_POSTGRES_PASSWORD", "env-secret"}});
  EXPECT_EQ(c.postgres.password, "env-secret");
}

TEST(ConfigSecrets, PasswordAndPasswordFileBothInTheEnvironmentIsAnError) {
  ScratchDir dir;
  const ConfigError e = error_of(
      kMinimal, {{"PGOUTBOX_POSTGRES_PASSWORD", "a"}, {"PGOUTBOX_POSTGRES_PASSWORD_FILE", dir.write("pg", "b")}});
  EXPECT_EQ(e.where(), "environment variable PGOUTBOX_POSTGRES_PASSWORD_FILE");
  EXPECT_EQ(e.problem(), "is set as well as PGOUTBOX_POSTGRES_PASSWORD; set only one");
}

TEST(ConfigSecrets, UnreadablePasswordFilesAreErrorsAtTheKey) {
  ScratchDir dir;
  const std::string head = "postgres:\n  dsn: host=db\n  password_file: ";
  const std::string tail = "\nkafka: {brokers: k}\ntables: [{table: t}]\n";

  ConfigError e = error_of(head + "/nonexistent/pg" + tail);
  EXPECT_EQ(e.key(), "postgres.password_file");
  EXPECT_EQ(e.line(), 3);
  EXPECT_EQ(e.column(), 18);
  EXPECT_EQ(e.problem(), "cannot read /nonexistent/pg: No such file or directory");

  e = error_of(head + dir.write("empty", "\n") + tail);
  EXPECT_NE(e.problem().find("is empty"), std::string::npos) << e.what();

  e = error_of(head + dir.path() + tail);
  EXPECT_NE(e.problem().find("is a folder, not a file"), std::string::npos) << e.what();

  e = error_of(head + dir.write("big", std::string(70 * 1024, 'x')) + tail);
  EXPECT_NE(e.problem().find("larger than 64 KiB"), std::string::npos) << e.what();
}

TEST(ConfigSecrets, PasswordInTheDsnAndElsewhereIsAnError) {
  const ConfigError e =
      error_of("postgres:\n  dsn: host=db password=dsn-secret\nkafka: {brokers: k}\ntables: [{table: t}]\n",
               {{"PGOUTBOX_POSTGRES_PASSWORD", "env-secret"}});
  EXPECT_EQ(e.key(), "postgres.dsn");
  EXPECT_EQ(e.line(), 2);
  EXPECT_EQ(e.problem(), "holds a password and PGOUTBOX_POSTGRES_PASSWORD gives one too; keep only one");
}

TEST(ConfigSecrets, APasswordInTheFilesDsnIsRefusedNamingTheVariable) {
  for (const std::string dsn : {"postgresql://relay:dsn-secret@db/app", "host=db password=dsn-secret"}) {
    const ConfigError e = error_of("postgres:\n  dsn: " + dsn + "\nkafka: {brokers: k}\ntables: [{table: t}]\n");
    EXPECT_EQ(e.key(), "postgres.dsn") << dsn;
    EXPECT_EQ(e.line(), 2) << dsn;
    EXPECT_NE(e.problem().find("set PGOUTBOX_POSTGRES_PASSWORD (or name a file in postgres.password_file)"),
              std::string::npos)
        << e.problem();
    EXPECT_EQ(std::string(e.what()).find("dsn-secret"), std::string::npos) << e.what();
  }
  const ConfigError ssl =
      error_of("postgres:\n  dsn: host=db sslkey=/k sslpassword=x\nkafka: {brokers: k}\ntables: [{table: t}]\n");
  EXPECT_NE(ssl.problem().find("holds a sslpassword"), std::string::npos) << ssl.problem();
}

// postgres.primary_dsn is a second connection string in the same file, with the same password
// (postgres.password): a secret in it is refused as in postgres.dsn.
TEST(ConfigSecrets, APasswordInTheFilesPrimaryDsnIsRefusedNamingTheVariable) {
  for (const std::string dsn : {"postgresql://relay:dsn-secret@primary/app", "host=primary password=dsn-secret"}) {
    const ConfigError e =
        error_of("postgres:\n  dsn: host=db\n  primary_dsn: " + dsn + "\nkafka: {brokers: k}\ntables: [{table: t}]\n");
    EXPECT_EQ(e.key(), "postgres.primary_dsn") << dsn;
    EXPECT_EQ(e.line(), 3) << dsn;
    EXPECT_NE(e.problem().find("set PGOUTBOX_POSTGRES_PASSWORD (or name a file in postgres.password_file)"),
              std::string::npos)
        << e.problem();
    EXPECT_EQ(std::string(e.what()).find("dsn-secret"), std::string::npos) << e.what();
  }
  const ConfigError ssl = error_of(
      "postgres:\n  dsn: host=db\n  primary_dsn: host=p sslkey=/k sslpassword=x\nkafka: {brokers: k}\ntables: [{table: "
      "t}]\n");
  EXPECT_EQ(ssl.key(), "postgres.primary_dsn");
  EXPECT_NE(ssl.problem().find("holds a sslpassword"), std::string::npos) << ssl.problem();
  EXPECT_NE(ssl.problem().find("PGOUTBOX_POSTGRES_PRIMARY_DSN"), std::string::npos) << ssl.problem();

  const Config c = load_yaml("postgres: {dsn: host=db}\nkafka: {brokers: k}\ntables: [{table: t}]\n",
                             {{"PGOUTBOX_POSTGRES_PRIMARY_DSN", "postgresql://relay:dsn-secret@primary/app"}});
  EXPECT_EQ(c.postgres.primary_dsn, "postgresql://relay:dsn-secret@primary/app");
}

TEST(ConfigSecrets, APasswordInADsnFromTheEnvironmentIsAllowed) {
  const Config c = load_yaml("kafka: {brokers: k}\ntables: [{table: t}]\n",
                             {{"PGOUTBOX_POSTGRES_DSN", "postgresql://relay:dsn-secret@db/app"}});
  EXPECT_EQ(c.postgres.dsn, "postgresql://relay:dsn-secret@db/app");
  EXPECT_EQ(c.postgres.password, "");
}

TEST(ConfigSecrets, EverySecretKafkaPropertyInTheFileIsRefusedNamingTheVariableAndTheFileVariant) {
  for (const std::string name : {"sasl.password", "ssl.key.password", "ssl.keystore.password",
                                 "sasl.oauthbearer.client.secret", "sasl.oauthbearer.config", "ssl.key.pem"}) {
    const ConfigError e = error_of("postgres: {dsn: host=db}\nkafka:\n  brokers: k\n  properties:\n    " + name +
                                   ": from-yaml\ntables: [{table: t}]\n");
    EXPECT_EQ(e.key(), "kafka.properties." + name);
    EXPECT_EQ(e.line(), 5) << name;
    std::string variable = "PGOUTBOX_KAFKA_PROPERTY_" + name;
    for (auto& c : variable) c = c == '.' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    EXPECT_EQ(e.problem(), "is a secret and is not read from the configuration file; set " + variable +
                               " or name a file in kafka.properties." + name + "_file");
  }
}

TEST(ConfigSecrets, KafkaSecretFromAFileVariant) {
  ScratchDir dir;
  dir.write("sasl", "sasl-secret\n");
  dir.write("key", "key-secret");
  const std::string config =
      dir.write("pgoutbox.yaml",
                "postgres: {dsn: host=db}\nkafka:\n  brokers: k\n  properties:\n    sasl.password_file: sasl\n"
                "    ssl.key.password_file: " +
                    dir.path() + "/key\ntables: [{table: t}]\n");
  const Config c = load(config, Environment{});
  EXPECT_EQ(c.kafka.properties,
            (std::map<std::string, std::string>{{"sasl.password", "sasl-secret"}, {"ssl.key.password", "key-secret"}}));
}

TEST(ConfigSecrets, KafkaSecretFileFromTheEnvironmentReplacesTheFilesValue) {
  ScratchDir dir;
  const Config c = load_yaml(
      "postgres: {dsn: host=db}\nkafka:\n  brokers: k\n  properties:\n    sasl.password_file: /nonexistent\ntables: "
      "[{table: t}]\n",
      {{"PGOUTBOX_KAFKA_PROPERTY_SASL_PASSWORD_FILE", dir.write("sasl", "from-env-file\n")}});
  EXPECT_EQ(c.kafka.properties, (std::map<std::string, std::string>{{"sasl.password", "from-env-file"}}));
}

TEST(ConfigSecrets, KafkaSecretAndItsFileVariantTogetherIsAnError) {
  const ConfigError e = error_of(
      "postgres: {dsn: host=db}\nkafka:\n  brokers: k\n  properties:\n    sasl.password: a\n    sasl.password_file: "
      "/x\ntables: [{table: t}]\n");
  EXPECT_EQ(e.key(), "kafka.properties.sasl.password_file");
  EXPECT_EQ(e.line(), 6);
  EXPECT_EQ(e.problem(), "is set as well as sasl.password; set only one");
}

TEST(ConfigSecrets, KafkaSecretFileThatCannotBeRead) {
  const ConfigError e = error_of(kMinimal, {{"PGOUTBOX_KAFKA_PROPERTY_SASL_PASSWORD_FILE", "/nonexistent/sasl"}});
  EXPECT_EQ(e.where(), "environment variable PGOUTBOX_KAFKA_PROPERTY_SASL_PASSWORD_FILE");
  EXPECT_EQ(e.key(), "kafka.properties.sasl.password_file");
  EXPECT_EQ(e.problem(), "cannot read /nonexistent/sasl: No such file or directory");
}

// The checkpoint signing key (docs/spec.md I11): a secret like the password, from the
// environment or a file, never from the configuration file itself.
TEST(ConfigSecrets, CheckpointSigningKeyFromAFileOrTheEnvironment) {
  ScratchDir dir;
  const std::string key(64, 'a');
  const std::string path = dir.write("checkpoint.key", key + "\n");
  EXPECT_EQ(load_yaml("postgres: {dsn: host=db}\nkafka: {brokers: k}\ncheckpoint: {signing_key_file: " + path +
                      "}\ntables: [{table: t}]\n")
                .checkpoint.signing_key,
            key);
  EXPECT_EQ(load_yaml(kMinimal, {{"PGOUTBOX_CHECKPOINT_SIGNING_KEY", key}}).checkpoint.signing_key, key);
  EXPECT_EQ(load_yaml(kMinimal, {{"PGOUTBOX_CHECKPOINT_SIGNING_KEY_FILE", path}}).checkpoint.signing_key, key);
  EXPECT_EQ(load_yaml(kMinimal).checkpoint.signing_key, "");
}

// One Secret reaching one replica as a file and another as an environment variable must give one
// key: the file's trailing CR/LF is dropped, and so is the variable's (issue 38 item 6), or the
// replicas refuse each other's checkpoints.
TEST(ConfigSecrets, CheckpointSigningKeyIsTheSameFromAFileOrAVariableWithATrailingNewline) {
  ScratchDir dir;
  const std::string key(64, 'b');
  const std::string path = dir.write("checkpoint.key", key + "\r\n");
  EXPECT_EQ(load_yaml(kMinimal, {{"PGOUTBOX_CHECKPOINT_SIGNING_KEY_FILE", path}}).checkpoint.signing_key, key);
  EXPECT_EQ(load_yaml(kMinimal, {{"PGOUTBOX_CHECKPOINT_SIGNING_KEY", key + "\n"}}).checkpoint.signing_key, key);
  EXPECT_EQ(load_yaml(kMinimal, {{"PGOUTBOX_CHECKPOINT_SIGNING_KEY", key + "\r\n"}}).checkpoint.signing_key, key);
}

// Whoever writes the signing key forges skips (issue 38 item 6): a key file that group or others
// may write, or that a user other than root and pgoutbox's own owns, is refused, as is such a
// configuration file, which names the key file. A 0644 key is only warned (readable is not writable).
TEST(ConfigSecrets, ASigningKeyOrConfigurationFileOthersCanWriteIsRefused) {
  ScratchDir dir;
  const std::string key = dir.write("checkpoint.key", std::string(64, 'c') + "\n");
  const Vars env = {{"PGOUTBOX_CHECKPOINT_SIGNING_KEY_FILE", key}};
  for (const auto mode : {0620, 0602, 0666}) {
    ASSERT_EQ(::chmod(key.c_str(), static_cast<mode_t>(mode)), 0);
    const ConfigError e = error_of(kMinimal, env);
    EXPECT_EQ(e.key(), "checkpoint.signing_key_file");
    EXPECT_NE(e.problem().find("writable by"), std::string::npos) << e.problem();
    EXPECT_NE(e.problem().find("chmod go-w " + key), std::string::npos) << e.problem();
  }
  ASSERT_EQ(::chmod(key.c_str(), 0644), 0);
  EXPECT_EQ(load_yaml(kMinimal, env).checkpoint.signing_key, std::string(64, 'c'));

  const std::string config = dir.write("pgoutbox.yaml", kMinimal);
  ASSERT_EQ(::chmod(config.c_str(), 0664), 0);
  try {
    load(config, Environment());
    ADD_FAILURE() << "a group-writable configuration file loaded";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.where(), config);
    EXPECT_NE(e.problem().find("writable by group"), std::string::npos) << e.problem();
  }
  ASSERT_EQ(::chmod(config.c_str(), 0644), 0);
  EXPECT_NO_THROW(load(config, Environment()));

  // Another non-root user owns it: that user may chmod it and write it. Only root can set this up.
  if (::geteuid() != 0) return;
  ASSERT_EQ(::chown(key.c_str(), 4242, 4242), 0);
  const ConfigError owned = error_of(kMinimal, env);
  EXPECT_EQ(owned.key(), "checkpoint.signing_key_file");
  EXPECT_NE(owned.problem().find("owned by user 4242"), std::string::npos) << owned.problem();
  ASSERT_EQ(::chown(config.c_str(), 4242, 4242), 0);
  EXPECT_THROW(load(config, Environment()), ConfigError);
}

// A read-only mount (a Kubernetes Secret, a `:ro` bind mount) is written by nobody here, whatever
// its bits or its owner: a tmpfs in a mount namespace of this test's own, remounted read-only.
TEST(ConfigSecrets, AFileOnAReadOnlyMountIsWrittenByNobody) {
  if (::geteuid() != 0) GTEST_SKIP() << "mounting needs root";
  ScratchDir dir;
  if (::unshare(CLONE_NEWNS) != 0 || ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
      ::mount("tmpfs", dir.path().c_str(), "tmpfs", 0, nullptr) != 0) {
    GTEST_SKIP() << "cannot mount here: " << std::strerror(errno);
  }
  const std::string key = dir.write("checkpoint.key", std::string(64, 'd'));
  const std::string config = dir.write("pgoutbox.yaml", kMinimal);
  for (const auto& file : {key, config}) {
    ASSERT_EQ(::chmod(file.c_str(), 0666), 0);
    ASSERT_EQ(::chown(file.c_str(), 4242, 4242), 0);
  }
  const Vars env = {{"PGOUTBOX_CHECKPOINT_SIGNING_KEY_FILE", key}};
  EXPECT_THROW(load(config, Environment(env)), ConfigError) << "a writable mount: refused";
  ASSERT_EQ(::mount(nullptr, dir.path().c_str(), nullptr, MS_REMOUNT | MS_RDONLY, nullptr), 0) << std::strerror(errno);
  EXPECT_EQ(load(config, Environment(env)).checkpoint.signing_key, std::string(64, 'd'));
  ASSERT_EQ(::umount(dir.path().c_str()), 0);
}

TEST(ConfigSecrets, CheckpointSigningKeyIsNeverInTheFileAndNeverShort) {
  const ConfigError in_file =
      error_of("postgres: {dsn: host=db}\nkafka: {brokers: k}\ncheckpoint: {signing_key: " + std::string(64, 'a') +
               "}\ntables: [{table: t}]\n");
  EXPECT_EQ(in_file.key(), "checkpoint.signing_key");
  const ConfigError short_key = error_of(kMinimal, {{"PGOUTBOX_CHECKPOINT_SIGNING_KEY", "hunter2"}});
  EXPECT_EQ(short_key.key(), "checkpoint.signing_key");
  EXPECT_NE(short_key.problem().find("at least 32"), std::string::npos) << short_key.problem();
  EXPECT_EQ(short_key.problem().find("hunter2"), std::string::npos) << "a secret is never printed";
}

}  // namespace
}  // namespace pgoutbox::config
