// Every reference the repository makes resolves inside the repository: a clone of the project
// alone has no dangling citation (docs/style.md §11 — comments cite docs/spec.md and
// docs/pgoutput.md). Three kinds are checked in every text file of the tree:
//   - a path that leaves the repository (`../shared/…`, or a markdown link climbing above the root);
//   - a `docs/NAME.md` citation, which must name an existing file;
//   - a bare `NAME.md` in capitals (SPEC.md, SECURITY.md…), which must exist at the root or in docs/;
// and, in markdown files, every relative link target must exist. A capitalised name may also sit
// beside the file that names it (bench/RESULTS.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

const fs::path root{PGOUTBOX_SOURCE_DIR};

bool skipped_dir(const fs::path& p) {
  const auto name = p.filename().string();
  return name == ".git" || name.rfind("build", 0) == 0 || name == ".deps" || name == "target" || name == "node_modules";
}

bool text_file(const fs::path& p) {
  static const std::vector<std::string> exts{".cpp", ".h",  ".hpp",  ".md",  ".txt", ".cmake", ".json",
                                             ".py",  ".sh", ".yaml", ".yml", ".sql", ".in",    ".toml"};
  const auto ext = p.extension().string();
  const auto name = p.filename().string();
  return std::find(exts.begin(), exts.end(), ext) != exts.end() || name == "Dockerfile" || name == "run";
}

std::vector<fs::path> tree_files() {
  std::vector<fs::path> out;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    if (it->is_directory() && skipped_dir(it->path())) {
      it.disable_recursion_pending();
      continue;
    }
    // This test's and the guide test's sources hold bad references on purpose (the checkers' examples).
    if (it->path().filename() == "references_test.cpp" || it->path().filename() == "guide_test.cpp") continue;
    if (it->is_regular_file() && text_file(it->path())) out.push_back(it->path());
  }
  return out;
}

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

bool name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-'; }

struct Problem {
  fs::path file;
  std::size_t line;
  std::string what;
};

std::size_t line_of(const std::string& text, std::size_t pos) {
  return 1 + static_cast<std::size_t>(std::count(text.begin(), text.begin() + static_cast<long>(pos), '\n'));
}

// `NAME.md` tokens: the characters before ".md" that make a file name.
void check_md_names(const fs::path& file, const std::string& text, std::vector<Problem>& out) {
  for (std::size_t pos = text.find(".md"); pos != std::string::npos; pos = text.find(".md", pos + 3)) {
    if (pos + 3 < text.size() && name_char(text[pos + 3])) continue;  // ".mdx", ".md5"…
    std::size_t start = pos;
    while (start > 0 && (name_char(text[start - 1]) || text[start - 1] == '/' || text[start - 1] == '.')) --start;
    std::string token = text.substr(start, pos + 3 - start);
    while (!token.empty() && token.front() == '/') token.erase(0, 1);
    if (token.find("../") != std::string::npos) {
      // Relative to the file: checked as a link when it is one; outside the tree it is a problem.
      const auto resolved = fs::weakly_canonical(file.parent_path() / token);
      const auto rel = resolved.lexically_relative(fs::weakly_canonical(root)).string();
      if (rel.rfind("..", 0) == 0) out.push_back({file, line_of(text, pos), "leaves the repository: " + token});
      continue;
    }
    const auto base = token.substr(token.rfind('/') == std::string::npos ? 0 : token.rfind('/') + 1);
    if (base.size() <= 3) continue;  // ".md" alone: an extension, not a file name
    const bool capitals = !base.empty() && std::all_of(base.begin(), base.end() - 3, [](char c) {
      return std::isupper(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-';
    });
    if (token.rfind("docs/", 0) == 0) {
      if (!fs::exists(root / token)) out.push_back({file, line_of(text, pos), "no such file: " + token});
    } else if (capitals && token == base) {
      if (!fs::exists(root / base) && !fs::exists(root / "docs" / base) && !fs::exists(file.parent_path() / base)) {
        out.push_back({file, line_of(text, pos), "no such file in the repository: " + base});
      }
    }
  }
}

// Markdown links `](target)`: relative targets must exist.
void check_links(const fs::path& file, const std::string& text, std::vector<Problem>& out) {
  for (std::size_t pos = text.find("]("); pos != std::string::npos; pos = text.find("](", pos + 2)) {
    const auto end = text.find(')', pos + 2);
    if (end == std::string::npos) break;
    std::string target = text.substr(pos + 2, end - pos - 2);
    if (target.empty() || target.find("://") != std::string::npos || target[0] == '#' ||
        target.rfind("mailto:", 0) == 0 || target.find(' ') != std::string::npos) {
      continue;
    }
    if (const auto hash = target.find('#'); hash != std::string::npos) target.resize(hash);
    const auto resolved = fs::weakly_canonical(file.parent_path() / target);
    const auto rel = resolved.lexically_relative(fs::weakly_canonical(root)).string();
    if (rel.rfind("..", 0) == 0) {
      out.push_back({file, line_of(text, pos), "link leaves the repository: " + target});
    } else if (!fs::exists(resolved)) {
      out.push_back({file, line_of(text, pos), "link to a missing file: " + target});
    }
  }
}

std::vector<Problem> problems_in(const fs::path& file) {
  std::vector<Problem> out;
  const auto text = read(file);
  for (std::size_t pos = text.find("../shared"); pos != std::string::npos; pos = text.find("../shared", pos + 1)) {
    out.push_back({file, line_of(text, pos), "cites ../shared, which is outside the repository"});
  }
  check_md_names(file, text, out);
  if (file.extension() == ".md") check_links(file, text, out);
  return out;
}

}  // namespace

TEST(References, EveryCitationResolvesInsideTheRepository) {
  const auto files = tree_files();
  ASSERT_GT(files.size(), 50U) << "the source tree was not found at " << root;
  std::vector<Problem> all;
  for (const auto& f : files) {
    const auto found = problems_in(f);
    all.insert(all.end(), found.begin(), found.end());
  }
  std::ostringstream report;
  for (const auto& p : all) report << fs::relative(p.file, root).string() << ':' << p.line << ": " << p.what << '\n';
  EXPECT_TRUE(all.empty()) << all.size() << " dangling reference(s):\n" << report.str();
}

// The checker itself finds what it is for: a scratch file with each kind of bad reference.
TEST(References, TheCheckerFindsEachKind) {
  const auto dir = root / "build" / "references-test-scratch";
  fs::create_directories(dir);
  const auto file = dir / "bad.md";
  std::ofstream(file) << "See ../shared/SPEC.md and SPEC.md, docs/nothing.md, [x](missing.md) and "
                         "[y](../../../../outside.md). README.md and docs/spec.md are fine.\n";
  const auto found = problems_in(file);
  fs::remove_all(dir);
  std::vector<std::string> whats;
  for (const auto& p : found) whats.push_back(p.what);
  auto has = [&](const std::string& part) {
    return std::any_of(whats.begin(), whats.end(),
                       [&](const std::string& w) { return w.find(part) != std::string::npos; });
  };
  EXPECT_TRUE(has("cites ../shared"));
  EXPECT_TRUE(has("no such file in the repository: SPEC.md"));
  EXPECT_TRUE(has("no such file: docs/nothing.md"));
  EXPECT_TRUE(has("link to a missing file: missing.md"));
  EXPECT_TRUE(has("link leaves the repository"));
  EXPECT_FALSE(has("README.md"));
  EXPECT_FALSE(has("docs/spec.md"));
}
