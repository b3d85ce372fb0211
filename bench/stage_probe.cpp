#include "stage_probe.h"

#include <cmath>
#include <limits>
#include <sstream>

#include "http_get.h"

namespace pgoutbox::bench {
namespace {

// The value of label `name` in a sample's label text (`stage="send",le="0.001"`).
std::optional<std::string> label(const std::string& labels, const std::string& name) {
  const auto at = labels.find(name + "=\"");
  if (at == std::string::npos) return std::nullopt;
  const auto start = at + name.size() + 2;
  const auto stop = labels.find('"', start);
  if (stop == std::string::npos) return std::nullopt;
  return labels.substr(start, stop - start);
}

// The `q` quantile of a cumulative histogram, linear inside the bucket it falls in; the last
// finite bound when it falls in +Inf.
double quantile(const std::vector<std::pair<double, double>>& cumulative, double q) {
  if (cumulative.empty() || cumulative.back().second <= 0) return 0;
  const double rank = q * cumulative.back().second;
  double lower_bound = 0, lower_count = 0;
  for (const auto& [bound, count] : cumulative) {
    if (count >= rank) {
      if (std::isinf(bound)) return lower_bound;
      const double in_bucket = count - lower_count;
      return in_bucket <= 0 ? bound : lower_bound + (bound - lower_bound) * (rank - lower_count) / in_bucket;
    }
    lower_bound = bound;
    lower_count = count;
  }
  return lower_bound;
}

}  // namespace

std::optional<double> metric_value(int port, const std::string& name) {
  const auto answer = test::http_get("127.0.0.1", port, "/metrics");
  if (answer.status != 200) return std::nullopt;
  std::istringstream lines(answer.body);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size() + 1));
  }
  return std::nullopt;
}

StageProbe::Buckets StageProbe::scrape() const {
  Buckets buckets;
  const auto answer = test::http_get("127.0.0.1", port_, "/metrics");
  if (answer.status != 200) return buckets;
  std::istringstream lines(answer.body);
  const std::string prefix = "pgoutbox_stage_seconds_bucket{";
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(prefix, 0) != 0) continue;
    const auto close = line.find('}');
    if (close == std::string::npos) continue;
    const std::string labels = line.substr(prefix.size(), close - prefix.size());
    const auto stage = label(labels, "stage");
    const auto le = label(labels, "le");
    if (!stage || !le) continue;
    const double bound = *le == "+Inf" ? std::numeric_limits<double>::infinity() : std::stod(*le);
    buckets[*stage].emplace_back(bound, std::stod(line.substr(close + 1)));
  }
  return buckets;
}

StageFigures StageProbe::end() const {
  StageFigures figures;
  for (auto [stage, after] : scrape()) {
    const auto before = before_.find(stage);
    if (before != before_.end() && before->second.size() == after.size()) {
      for (std::size_t i = 0; i < after.size(); ++i) after[i].second -= before->second[i].second;
    }
    figures[stage] = {quantile(after, 0.50) * 1000, quantile(after, 0.99) * 1000};
  }
  return figures;
}

}  // namespace pgoutbox::bench
