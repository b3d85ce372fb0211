// The guide's exit-code table (docs/operating.md "Exit codes"), the codes the binary has (relay::Fatal, run's and the
// operator commands' constants) and what each verb's --help lists must agree, so none can drift: a code added to one
// and not the others fails here.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <string>

#include "operator_commands.h"
#include "pgoutbox/relay/outcome.h"
#include "run_command.h"

namespace {

using pgoutbox::relay::Fatal;
using Codes = std::set<int>;

const std::vector<std::string> kVerbs = {
    "run", "check", "status", "slot drop", "republish", "config validate", "config from-debezium", "config-reference"};

std::string guide() {
  std::ifstream in(std::string(PGOUTBOX_SOURCE_DIR) + "/docs/operating.md");
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string help(const std::string& verb) {
  std::string out;
  FILE* pipe = ::popen((std::string(PGOUTBOX_BINARY) + " " + verb + " --help 2>&1").c_str(), "r");
  if (pipe == nullptr) return out;
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) out.append(buffer, n);
  ::pclose(pipe);
  return out;
}

// Every cause `run` can exit with. The switch has no default: a new relay::Fatal does not compile
// here (-Wswitch, warnings are errors) until it is listed, and then it must be in the guide.
Codes fatal_codes() {
  Codes codes;
  for (int i = 0; i < 256; ++i) {
    switch (static_cast<Fatal>(i)) {
      case Fatal::internal:
      case Fatal::poison:
      case Fatal::slot_invalidated:
      case Fatal::slot_unusable:
      case Fatal::publication:
      case Fatal::table_missing:
      case Fatal::permission:
      case Fatal::wal_level:
      case Fatal::authentication:
      case Fatal::mapping:
      case Fatal::kafka_config:
      case Fatal::slot_two_phase:
      case Fatal::tls:
      case Fatal::server_version:
      case Fatal::fenced:
      case Fatal::checkpoint_hidden:
      case Fatal::checkpoint_refused:
      case Fatal::checkpoint_lost:
        codes.insert(i);
        break;
    }
  }
  return codes;
}

// The verb a backticked command names ("slot drop --yes" -> "slot drop"), or "".
std::string verb_of(const std::string& quoted) {
  for (const auto& verb : kVerbs) {
    if (quoted == verb || quoted.rfind(verb + " ", 0) == 0) return verb;
  }
  return "";
}

// docs/operating.md "Exit codes": code -> the verbs it is for. A row that starts with verbs ("`run`: ...",
// "`status`, `slot drop`: ...", "`check`: ...; `slot drop`: ...") is for the verbs heading its
// clauses; any other row ("done (...)", "wrong command line") is for every verb.
std::map<int, std::set<std::string>> guide_table() {
  const auto text = guide();
  const auto start = text.find("\n## Exit codes\n");
  const auto end = text.find("\n## ", start + 1);
  std::map<int, std::set<std::string>> table;
  if (start == std::string::npos) return table;
  const std::regex row(R"(\n\| ([0-9]+) \| ([^\n]*) \|)");
  const std::regex head(R"((?:^|; )((?:`[^`]+`(?:, | and )?)+):)");
  const std::regex quoted("`([^`]+)`");
  const auto section = text.substr(start, end - start);
  for (auto it = std::sregex_iterator(section.begin(), section.end(), row); it != std::sregex_iterator(); ++it) {
    const int code = std::stoi((*it)[1]);
    const std::string meaning = (*it)[2];
    auto& verbs = table[code];
    if (meaning.empty() || meaning[0] != '`') {
      verbs.insert(kVerbs.begin(), kVerbs.end());
      continue;
    }
    for (auto h = std::sregex_iterator(meaning.begin(), meaning.end(), head); h != std::sregex_iterator(); ++h) {
      const std::string heads = (*h)[1];
      for (auto q = std::sregex_iterator(heads.begin(), heads.end(), quoted); q != std::sregex_iterator(); ++q) {
        const auto verb = verb_of((*q)[1]);
        EXPECT_FALSE(verb.empty()) << "row " << code << " names no verb: " << (*q)[1];
        verbs.insert(verb);
      }
    }
  }
  return table;
}

// The codes a --help footer lists: "Exit codes: 0 done; 1 ...; 3, 4 and 10-21 run stopped ...".
Codes help_codes(const std::string& text) {
  Codes codes;
  const auto at = text.find("Exit codes: ");
  if (at == std::string::npos) return codes;
  const auto footer = text.substr(at + 12, text.find('\n', at) - at - 12);
  const std::regex number(R"(^([0-9]+)(?:-([0-9]+))?(, | and )?)");
  std::size_t clause = 0;
  while (clause < footer.size()) {
    auto rest = footer.substr(clause);
    for (std::smatch m; std::regex_search(rest, m, number);) {
      const int from = std::stoi(m[1]);
      const int to = m[2].matched ? std::stoi(m[2]) : from;
      for (int c = from; c <= to; ++c) codes.insert(c);
      if (!m[3].matched) break;
      rest = m.suffix();
    }
    const auto next = footer.find("; ", clause);
    if (next == std::string::npos) break;
    clause = next + 2;
  }
  return codes;
}

Codes guide_codes_for(const std::string& verb) {
  Codes codes;
  for (const auto& [code, verbs] : guide_table()) {
    if (verbs.count(verb)) codes.insert(code);
  }
  // config-reference reads no configuration: "invalid configuration" is not one of its ends.
  if (verb == "config-reference") codes.erase(pgoutbox::app::kExitConfig);
  return codes;
}

TEST(ExitCodes, TheReadmeTableIsParsed) {
  const auto table = guide_table();
  ASSERT_GE(table.size(), 20U);
  EXPECT_EQ(table.at(16), (std::set<std::string>{"run"}));
  EXPECT_EQ(table.at(21), (std::set<std::string>{"run", "check"}));
  EXPECT_EQ(table.at(1), (std::set<std::string>{"check", "slot drop"}));
  EXPECT_EQ(table.at(7), (std::set<std::string>{"slot drop"}));
  EXPECT_EQ(table.at(64).size(), kVerbs.size());
  EXPECT_EQ(help_codes("Exit codes: 0 a; 3, 4 and 10-12 b; 64 c.\n"), (Codes{0, 3, 4, 10, 11, 12, 64}));
}

TEST(ExitCodes, EveryCodeOfTheBinaryIsInTheReadmeForItsVerb) {
  const auto run = guide_codes_for("run");
  for (const int code : fatal_codes()) EXPECT_TRUE(run.count(code)) << "relay::Fatal " << code;
  using namespace pgoutbox::app;
  for (const int code : {kExitOk, kExitConfig, kExitStoppedUnacknowledged, kExitSecondSignal}) {
    EXPECT_TRUE(run.count(code)) << "run's " << code;
  }
  EXPECT_TRUE(guide_codes_for("check").count(kExitBlocked));
  EXPECT_TRUE(guide_codes_for("slot drop").count(kExitBlocked));
  for (const auto& verb : {"status", "slot drop"}) {
    EXPECT_TRUE(guide_codes_for(verb).count(kExitPostgres)) << verb;
    EXPECT_TRUE(guide_codes_for(verb).count(kExitNoSlot)) << verb;
  }
  EXPECT_TRUE(guide_codes_for("slot drop").count(kExitSlotActive));
  for (const auto& verb : kVerbs) EXPECT_TRUE(guide_codes_for(verb).count(kExitUsage)) << verb;
  // And nothing in the guide's rows for run that run cannot return.
  Codes known = fatal_codes();
  known.insert({kExitOk, kExitConfig, kExitStoppedUnacknowledged, kExitSecondSignal, kExitUsage});
  for (const int code : run) EXPECT_TRUE(known.count(code)) << "docs/operating.md lists " << code << " for run";
}

TEST(ExitCodes, EachVerbsHelpListsTheReadmesCodesForIt) {
  Codes all;
  for (const auto& verb : kVerbs) {
    SCOPED_TRACE(verb);
    const auto text = help(verb);
    EXPECT_EQ(help_codes(text), guide_codes_for(verb)) << text;
    const auto codes = guide_codes_for(verb);
    all.insert(codes.begin(), codes.end());
  }
  const auto top = help("");
  EXPECT_EQ(help_codes(top), all) << top;
}

}  // namespace
