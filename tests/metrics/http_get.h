#pragma once

// A plain HTTP/1.1 GET for tests (Boost.Beast client), and lookups in Prometheus text.

#include <chrono>
#include <optional>
#include <string>

namespace pgoutbox::test {

struct HttpResult {
  unsigned status = 0;  // 0: no answer (connection refused, timeout)
  std::string content_type;
  std::string body;
};

// `timeout` bounds the whole exchange: connect, request and response. The Host header is what
// curl, Prometheus and the kubelet send, "host:port" ("[v6]:port"), unless `host_header` says
// otherwise ("": none at all).
HttpResult http_get(const std::string& host, int port, const std::string& target,
                    std::chrono::milliseconds timeout = std::chrono::seconds(10));
HttpResult http_request(const std::string& host, int port, const std::string& method, const std::string& target,
                        std::chrono::milliseconds timeout = std::chrono::seconds(10),
                        const std::optional<std::string>& host_header = std::nullopt);

// The sum of the samples named `name` (exactly, before '{' or ' ') whose label text contains
// `label_filter` (e.g. "topic=\"t\""), from a Prometheus text exposition; nullopt when none.
std::optional<double> sample_sum(const std::string& exposition, const std::string& name,
                                 const std::string& label_filter = "");

}  // namespace pgoutbox::test
