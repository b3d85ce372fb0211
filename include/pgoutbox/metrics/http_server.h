#pragma once

// A small HTTP/1.1 server (Boost.Beast over Asio, one thread of its own) for /metrics, /healthz
// and /readyz. GET and HEAD only; each route is a function that builds the response when asked.
// Keep-alive is honoured; a request must arrive whole within 5 s and an idle connection is
// closed after 5 s. Every connection is accepted at once: at most HttpLimits::max_connections
// are held, and a new one closes the one that has waited longest for a request, so idle clients
// cannot hold a probe back. A connection whose descriptor would leave fewer than
// `reserved_descriptors` free under RLIMIT_NOFILE also closes the oldest (or, when the server
// holds none, is closed itself): the relay's own connections come first. A request is answered
// only when its Host header is an IP address, localhost or one of `allowed_hosts` (any port);
// any other gets 421 Misdirected Request, so a DNS-rebinding page cannot read the routes.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace pgoutbox::metrics {

struct HttpResponse {
  unsigned status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

using Routes = std::map<std::string, std::function<HttpResponse()>>;

struct HttpLimits {
  // Connections held open at a time. Each costs a descriptor and at most 9 KiB of request buffers
  // plus one response.
  std::size_t max_connections = 64;
  std::uint64_t reserved_descriptors = 64;
};

class HttpServer {
 public:
  // Listens on `address`, "host:port" ("[v6]:port" for IPv6 literals; port 0 picks a free
  // one). Throws std::runtime_error naming the address when it cannot listen. `allowed_hosts`:
  // host names (no port; compared without case) answered besides IP addresses and localhost.
  HttpServer(const std::string& address, Routes routes, HttpLimits limits = {},
             std::vector<std::string> allowed_hosts = {});
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  std::uint16_t port() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pgoutbox::metrics
