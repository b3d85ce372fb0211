#pragma once

// A small HTTP/1.1 server (Boost.Beast over Asio, one thread of its own) for /metrics, /healthz
// and /readyz. GET and HEAD only; each route is a function that builds the response when asked.
// Keep-alive is honoured; a connection idle for 30 s is closed.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

namespace pgoutbox::metrics {

struct HttpResponse {
  unsigned status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

using Routes = std::map<std::string, std::function<HttpResponse()>>;

class HttpServer {
 public:
  // Listens on `address`, "host:port" ("[v6]:port" for IPv6 literals; port 0 picks a free
  // one). Throws std::runtime_error naming the address when it cannot listen.
  HttpServer(const std::string& address, Routes routes);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  std::uint16_t port() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pgoutbox::metrics
