// The user guide holds together (issue 28 §3): README.md and docs/*.md are one guide whose every
// relative link and #anchor resolves (GitHub's heading slugs), whose every page is reachable from
// the README and carries the same navigation line as docs/index.md, and which names every
// configuration key (config::schema()), every exit code (relay::Fatal and the commands'
// constants) and every metric the binary registers (the probes, on a fresh registry).
#include <gtest/gtest.h>
#include <prometheus/registry.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "operator_commands.h"
#include "pgoutbox/config/schema.h"
#include "pgoutbox/metrics/endpoints.h"
#include "pgoutbox/metrics/relay_probe.h"
#include "pgoutbox/metrics/slot_probe.h"
#include "pgoutbox/relay/outcome.h"
#include "run_command.h"

namespace fs = std::filesystem;

namespace {

const fs::path root{PGOUTBOX_SOURCE_DIR};

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// README.md and every page of docs/.
std::vector<fs::path> guide_pages(const fs::path& top) {
  std::vector<fs::path> pages{top / "README.md"};
  for (const auto& entry : fs::directory_iterator(top / "docs")) {
    if (entry.is_regular_file() && entry.path().extension() == ".md") pages.push_back(entry.path());
  }
  std::sort(pages.begin() + 1, pages.end());
  return pages;
}

// The lines outside fenced code blocks.
std::vector<std::string> prose_lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  bool fenced = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("```", 0) == 0) {
      fenced = !fenced;
      continue;
    }
    out.push_back(fenced ? std::string() : line);
  }
  return out;
}

// One UTF-8 code point from `s` at `i` (advancing `i`).
char32_t next_code_point(const std::string& s, std::size_t& i) {
  const auto c = static_cast<unsigned char>(s[i++]);
  if (c < 0x80) return c;
  const int extra = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : 1;
  char32_t cp = c & (0x3F >> extra);
  for (int k = 0; k < extra && i < s.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i++]) & 0x3F);
  return cp;
}

// GitHub's anchor for a heading (github-slugger): the rendered text in lower case, punctuation and
// symbols dropped (letters, digits, '_', '-' and other scripts' letters kept), each space a '-'.
std::string slug(const std::string& heading) {
  std::string text;
  // Rendered text: inline code and emphasis markers go, a link keeps its text.
  for (std::size_t i = 0; i < heading.size(); ++i) {
    const char c = heading[i];
    if (c == '`' || c == '*') continue;
    if (c == ']' && i + 1 < heading.size() && heading[i + 1] == '(') {
      i = heading.find(')', i);
      if (i == std::string::npos) break;
      continue;
    }
    if (c == '[') continue;
    text += c;
  }
  std::string out;
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t start = i;
    const char32_t cp = next_code_point(text, i);
    if (cp < 0x80) {
      const auto c = static_cast<char>(cp);
      if (std::isalnum(static_cast<unsigned char>(c)) != 0) {
        out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      } else if (c == ' ') {
        out += '-';
      } else if (c == '-' || c == '_') {
        out += c;
      }
      continue;
    }
    // Latin-1 symbols, general punctuation (dashes, quotes, ellipsis), arrows, mathematical
    // operators, box drawing and the like: dropped. Letters of other scripts: kept.
    const bool symbol = (cp >= 0xA0 && cp <= 0xBF) || cp == 0xD7 || cp == 0xF7 || (cp >= 0x2000 && cp <= 0x2BFF) ||
                        (cp >= 0x3000 && cp <= 0x303F);
    if (!symbol) out += text.substr(start, i - start);
  }
  return out;
}

// The anchors of a page: each heading's slug, repeats numbered as GitHub does (-1, -2, ...).
std::set<std::string> anchors_of(const std::string& text) {
  std::set<std::string> anchors;
  std::map<std::string, int> seen;
  for (const auto& line : prose_lines(text)) {
    const auto hashes = line.find_first_not_of('#');
    if (hashes == 0 || hashes == std::string::npos || hashes > 6 || line[hashes] != ' ') continue;
    const auto base = slug(line.substr(hashes + 1));
    const int n = seen[base]++;
    anchors.insert(n == 0 ? base : base + "-" + std::to_string(n));
  }
  return anchors;
}

struct Link {
  std::size_t line;
  std::string target;
};

// Markdown links `[text](target)` and images outside code (fenced blocks and inline spans).
std::vector<Link> links_of(const std::string& text) {
  std::vector<Link> out;
  const auto lines = prose_lines(text);
  for (std::size_t n = 0; n < lines.size(); ++n) {
    std::string line = lines[n];
    // Inline code spans hold no links.
    for (auto open = line.find('`'); open != std::string::npos; open = line.find('`')) {
      const auto close = line.find('`', open + 1);
      if (close == std::string::npos) break;
      line.erase(open, close - open + 1);
    }
    for (auto pos = line.find("]("); pos != std::string::npos; pos = line.find("](", pos + 2)) {
      const auto end = line.find(')', pos + 2);
      if (end == std::string::npos) break;
      out.push_back({n + 1, line.substr(pos + 2, end - pos - 2)});
    }
  }
  return out;
}

bool external(const std::string& target) {
  return target.find("://") != std::string::npos || target.rfind("mailto:", 0) == 0;
}

// Every problem with the links of the guide under `top`: a missing file, a missing anchor.
std::vector<std::string> link_problems(const fs::path& top) {
  std::vector<std::string> problems;
  std::map<fs::path, std::set<std::string>> anchors;
  auto anchors_in = [&](const fs::path& file) -> const std::set<std::string>& {
    auto it = anchors.find(file);
    if (it == anchors.end()) it = anchors.emplace(file, anchors_of(read(file))).first;
    return it->second;
  };
  for (const auto& page : guide_pages(top)) {
    const auto where = fs::relative(page, top).string();
    for (const auto& link : links_of(read(page))) {
      if (external(link.target) || link.target.empty()) continue;
      const auto hash = link.target.find('#');
      const auto path = link.target.substr(0, hash);
      const auto anchor = hash == std::string::npos ? std::string() : link.target.substr(hash + 1);
      const auto file = path.empty() ? page : fs::weakly_canonical(page.parent_path() / path);
      const auto at = where + ":" + std::to_string(link.line) + ": ";
      if (!fs::exists(file)) {
        problems.push_back(at + "no such file: " + link.target);
      } else if (!anchor.empty() && file.extension() == ".md" && anchors_in(file).count(anchor) == 0) {
        problems.push_back(at + "no heading with anchor #" + anchor + " in " + fs::relative(file, top).string());
      }
    }
  }
  return problems;
}

std::string join(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

std::string whole_guide() {
  std::string all;
  for (const auto& page : guide_pages(root)) all += read(page) + "\n";
  return all;
}

}  // namespace

TEST(Guide, SlugsFollowGitHubsRules) {
  EXPECT_EQ(slug("Poison records (I8)"), "poison-records-i8");
  EXPECT_EQ(slug("\"The order was committed but no event arrived\""), "the-order-was-committed-but-no-event-arrived");
  EXPECT_EQ(slug("Install on Debian/Ubuntu"), "install-on-debianubuntu");
  EXPECT_EQ(slug("`pgoutbox check` — the preflight"), "pgoutbox-check--the-preflight");
  EXPECT_EQ(slug("PgoutboxKafkaDown"), "pgoutboxkafkadown");
  const auto anchors = anchors_of("# A\n## Same\n```\n# not a heading\n```\n## Same\n");
  EXPECT_EQ(anchors, (std::set<std::string>{"a", "same", "same-1"}));
}

TEST(Guide, EveryRelativeLinkAndAnchorResolves) {
  const auto problems = link_problems(root);
  EXPECT_TRUE(problems.empty()) << problems.size() << " broken link(s):\n" << join(problems);
}

// The checker finds what it is for: a scratch guide with a missing file and a missing anchor.
TEST(Guide, TheLinkCheckerFindsBrokenLinks) {
  const auto top = root / "build" / "guide-test-scratch";
  fs::remove_all(top);
  fs::create_directories(top / "docs");
  std::ofstream(top / "README.md") << "# R\n\n[ok](docs/a.md#two-words) [file](docs/missing.md) "
                                      "[anchor](docs/a.md#nowhere) [self](#r) `[code](docs/missing.md)`\n";
  std::ofstream(top / "docs" / "a.md") << "# A\n\n## Two words\n\n[up](../README.md#r) [bad](#gone)\n";
  const auto problems = join(link_problems(top));
  fs::remove_all(top);
  EXPECT_NE(problems.find("README.md:3: no such file: docs/missing.md"), std::string::npos) << problems;
  EXPECT_NE(problems.find("no heading with anchor #nowhere in docs/a.md"), std::string::npos) << problems;
  EXPECT_NE(problems.find("docs/a.md:5: no heading with anchor #gone"), std::string::npos) << problems;
  EXPECT_EQ(std::count(problems.begin(), problems.end(), '\n'), 3) << problems;
}

// Every page of docs/ can be reached from the README by following links, and carries the map's
// navigation line, so each page leads to its neighbours.
TEST(Guide, EveryPageIsReachableAndCarriesTheNavigationLine) {
  std::string nav;
  for (const auto& line : prose_lines(read(root / "docs" / "index.md"))) {
    if (line.rfind("Guide: ", 0) == 0) nav = line;
  }
  ASSERT_FALSE(nav.empty()) << "docs/index.md has no \"Guide: \" navigation line";
  std::set<fs::path> reached;
  std::vector<fs::path> todo{fs::weakly_canonical(root / "README.md")};
  while (!todo.empty()) {
    const auto page = todo.back();
    todo.pop_back();
    if (!reached.insert(page).second) continue;
    for (const auto& link : links_of(read(page))) {
      if (external(link.target)) continue;
      const auto path = link.target.substr(0, link.target.find('#'));
      if (path.empty() || fs::path(path).extension() != ".md") continue;
      const auto file = fs::weakly_canonical(page.parent_path() / path);
      if (fs::exists(file) && file.parent_path() == fs::weakly_canonical(root / "docs")) todo.push_back(file);
    }
  }
  for (const auto& page : guide_pages(root)) {
    if (page.filename() == "README.md") continue;
    const auto name = fs::relative(page, root).string();
    EXPECT_TRUE(reached.count(fs::weakly_canonical(page))) << name << " cannot be reached from README.md";
    const auto lines = prose_lines(read(page));
    EXPECT_TRUE(std::find(lines.begin(), lines.end(), nav) != lines.end())
        << name << " lacks the navigation line of docs/index.md";
  }
}

TEST(Guide, NamesEveryConfigurationKey) {
  const auto guide = whole_guide();
  const auto keys = pgoutbox::config::schema();
  ASSERT_GT(keys.size(), 30U);
  for (const auto& key : keys) {
    EXPECT_NE(guide.find("`" + key.path + "`"), std::string::npos) << key.path << " is not in the guide";
  }
}

// Every code the binary exits with is a row of an exit-code table in the guide. The switch has
// no default: a new relay::Fatal does not compile here until it is listed.
TEST(Guide, NamesEveryExitCode) {
  std::set<int> codes;
  for (int i = 0; i < 256; ++i) {
    switch (static_cast<pgoutbox::relay::Fatal>(i)) {
      case pgoutbox::relay::Fatal::internal:
      case pgoutbox::relay::Fatal::poison:
      case pgoutbox::relay::Fatal::slot_invalidated:
      case pgoutbox::relay::Fatal::slot_unusable:
      case pgoutbox::relay::Fatal::publication:
      case pgoutbox::relay::Fatal::table_missing:
      case pgoutbox::relay::Fatal::permission:
      case pgoutbox::relay::Fatal::wal_level:
      case pgoutbox::relay::Fatal::authentication:
      case pgoutbox::relay::Fatal::mapping:
      case pgoutbox::relay::Fatal::kafka_config:
      case pgoutbox::relay::Fatal::slot_two_phase:
      case pgoutbox::relay::Fatal::tls:
      case pgoutbox::relay::Fatal::server_version:
      case pgoutbox::relay::Fatal::fenced:
      case pgoutbox::relay::Fatal::checkpoint_hidden:
      case pgoutbox::relay::Fatal::checkpoint_refused:
      case pgoutbox::relay::Fatal::checkpoint_lost:
        codes.insert(i);
        break;
    }
  }
  using namespace pgoutbox::app;
  codes.insert({kExitOk, kExitConfig, kExitStoppedUnacknowledged, kExitSecondSignal, kExitBlocked, kExitPostgres,
                kExitNoSlot, kExitSlotActive, kExitUsage});
  const auto guide = whole_guide();
  for (const int code : codes) {
    EXPECT_NE(guide.find("\n| " + std::to_string(code) + " | "), std::string::npos)
        << "exit code " << code << " has no row in the guide";
  }
}

// Every metric the metrics module registers: the "pgoutbox_…" names in src/metrics/ (labelled
// families have no series on a fresh registry, so Collect() alone would miss them); every family
// a fresh registry does collect must be among them, so the scan cannot fall behind the probes.
TEST(Guide, NamesEveryMetric) {
  std::set<std::string> names;
  const std::regex literal("\"(pgoutbox_[a-z0-9_]+)\"");
  for (const auto& entry : fs::directory_iterator(root / "src" / "metrics")) {
    const auto text = read(entry.path());
    for (auto it = std::sregex_iterator(text.begin(), text.end(), literal); it != std::sregex_iterator(); ++it) {
      names.insert((*it)[1]);
    }
  }
  ASSERT_GT(names.size(), 25U);
  prometheus::Registry registry;
  pgoutbox::metrics::RelayProbe relay(registry);
  pgoutbox::metrics::SlotProbe slot(registry);
  const auto routes = pgoutbox::metrics::endpoints(registry, relay);
  pgoutbox::metrics::register_process_info(registry, "test");
  const auto families = registry.Collect();
  ASSERT_GT(families.size(), 10U);
  for (const auto& family : families)
    EXPECT_TRUE(names.count(family.name)) << family.name << " not found in src/metrics";
  const auto guide = whole_guide();
  for (const auto& name : names) EXPECT_NE(guide.find("`" + name), std::string::npos) << name << " is not in the guide";
}
