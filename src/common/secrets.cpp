#include "pgoutbox/secrets.h"

#include <algorithm>
#include <atomic>
#include <mutex>

namespace pgoutbox {
namespace {

struct Registry {
  std::mutex mutex;
  std::vector<std::string> secrets;  // longest first, no duplicates
  std::atomic<bool> any{false};      // spares the lock for every log line of a process without secrets
};

// Never destroyed: a log line written while statics are torn down still reaches it.
Registry& registry() {
  static auto* r = new Registry;
  return *r;
}

}  // namespace

void remember_secrets(const std::vector<std::string>& secrets) {
  auto& r = registry();
  const std::lock_guard lock(r.mutex);
  for (const auto& secret : secrets) {
    if (secret.size() < kMinSecretBytes) continue;
    if (std::find(r.secrets.begin(), r.secrets.end(), secret) == r.secrets.end()) r.secrets.push_back(secret);
  }
  std::stable_sort(r.secrets.begin(), r.secrets.end(),
                   [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  r.any = !r.secrets.empty();
}

std::string redact_secrets(std::string_view text) {
  std::string out(text);
  auto& r = registry();
  if (!r.any) return out;
  const std::lock_guard lock(r.mutex);
  for (const auto& secret : r.secrets) {
    for (auto at = out.find(secret); at != std::string::npos; at = out.find(secret, at + kRedactedSecret.size())) {
      out.replace(at, secret.size(), kRedactedSecret);
    }
  }
  return out;
}

void forget_secrets() {
  auto& r = registry();
  const std::lock_guard lock(r.mutex);
  r.secrets.clear();
  r.any = false;
}

}  // namespace pgoutbox
