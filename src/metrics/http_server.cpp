// HTTP/1.1 with Boost.Beast: one acceptor and one async session per connection on an io_context
// of the server's own thread. Requests are small (probes and scrapes), so each is read whole
// with Beast's default parser limits, answered from its route, and the connection kept open
// when the client asked for keep-alive.
#include "pgoutbox/metrics/http_server.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <fmt/format.h>

#include <stdexcept>
#include <thread>

namespace pgoutbox::metrics {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

constexpr auto kIdleTimeout = std::chrono::seconds(30);

// "host:port", "[v6]:port"; an empty host listens on every IPv4 address.
std::pair<std::string, std::string> split_address(const std::string& address) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos || colon + 1 == address.size()) {
    throw std::runtime_error(fmt::format("metrics address {} is not host:port", address));
  }
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host.empty()) host = "0.0.0.0";
  return {host, address.substr(colon + 1)};
}

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, const Routes& routes) : stream_(std::move(socket)), routes_(routes) {}

  void start() { read(); }

 private:
  void read() {
    request_ = {};
    stream_.expires_after(kIdleTimeout);
    http::async_read(stream_, buffer_, request_,
                     [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_read(ec); });
  }

  void on_read(beast::error_code ec) {
    if (ec) {
      // end_of_stream: the client closed; anything else (timeout, garbage): drop the connection.
      beast::error_code ignored;
      stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
      return;
    }
    response_ = respond();
    http::async_write(stream_, response_, [self = shared_from_this()](beast::error_code write_ec, std::size_t) {
      self->on_write(write_ec);
    });
  }

  http::response<http::string_body> respond() {
    http::response<http::string_body> res;
    res.version(request_.version());
    res.keep_alive(request_.keep_alive());
    res.set(http::field::server, "pgoutbox");
    const auto method = request_.method();
    std::string target(request_.target());
    if (const auto q = target.find('?'); q != std::string::npos) target.resize(q);
    const auto route = routes_.find(target);
    HttpResponse answer;
    if (route == routes_.end()) {
      answer = HttpResponse{404, "text/plain; charset=utf-8", "not found\n"};
    } else if (method != http::verb::get && method != http::verb::head) {
      answer = HttpResponse{405, "text/plain; charset=utf-8", "only GET and HEAD\n"};
      res.set(http::field::allow, "GET, HEAD");
    } else {
      answer = route->second();
    }
    res.result(answer.status);
    res.set(http::field::content_type, answer.content_type);
    res.set(http::field::cache_control, "no-store");
    if (method == http::verb::head) {
      res.content_length(answer.body.size());
    } else {
      res.body() = std::move(answer.body);
      res.prepare_payload();
    }
    return res;
  }

  void on_write(beast::error_code ec) {
    if (ec) return;
    if (!response_.keep_alive()) {
      beast::error_code ignored;
      stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
      return;
    }
    read();
  }

  beast::tcp_stream stream_;
  const Routes& routes_;
  beast::flat_buffer buffer_;
  http::request<http::string_body> request_;
  http::response<http::string_body> response_;
};

}  // namespace

class HttpServer::Impl {
 public:
  Impl(const std::string& address, Routes routes) : routes_(std::move(routes)), acceptor_(io_) {
    const auto [host, port] = split_address(address);
    beast::error_code ec;
    tcp::resolver resolver(io_);
    const auto endpoints = resolver.resolve(host, port, tcp::resolver::passive | tcp::resolver::numeric_service, ec);
    if (ec || endpoints.empty()) {
      throw std::runtime_error(fmt::format("metrics address {}: cannot resolve: {}", address, ec.message()));
    }
    const tcp::endpoint endpoint = endpoints.begin()->endpoint();
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) throw std::runtime_error(fmt::format("metrics address {}: cannot listen: {}", address, ec.message()));
    accept();
    thread_ = std::thread([this] { io_.run(); });
  }

  ~Impl() {
    io_.stop();
    thread_.join();
  }

  std::uint16_t port() const { return acceptor_.local_endpoint().port(); }

 private:
  void accept() {
    acceptor_.async_accept(asio::make_strand(io_), [this](beast::error_code ec, tcp::socket socket) {
      if (!ec) std::make_shared<Session>(std::move(socket), routes_)->start();
      if (ec != asio::error::operation_aborted) accept();
    });
  }

  Routes routes_;
  asio::io_context io_;
  tcp::acceptor acceptor_;
  std::thread thread_;
};

HttpServer::HttpServer(const std::string& address, Routes routes)
    : impl_(std::make_unique<Impl>(address, std::move(routes))) {}
HttpServer::~HttpServer() = default;
std::uint16_t HttpServer::port() const { return impl_->port(); }

}  // namespace pgoutbox::metrics
