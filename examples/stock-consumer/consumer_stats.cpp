#include "consumer_stats.h"

#include <fmt/format.h>

#include <cstdio>
#include <fstream>

namespace shop {

std::string ConsumerStats::to_text() const {
  return fmt::format("handled={}\napplied={}\nduplicates={}\nrejected={}\ndead_lettered={}\nretries={}\nlag={}\n",
                     handled, applied, duplicates, rejected, dead_lettered, retries, lag);
}

void ConsumerStats::write_file(const std::string& path) const {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << to_text();
    if (!out) return;  // statistics are best effort; consuming goes on
  }
  std::rename(tmp.c_str(), path.c_str());
}

}  // namespace shop
