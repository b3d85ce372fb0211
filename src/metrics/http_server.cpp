// HTTP/1.1 with Boost.Beast: one acceptor and one async session per connection, all on one
// io_context run by the server's own thread (so no strand and no locking). Requests are small
// (probes and scrapes): each is read whole with small parser limits, answered from its route,
// and the connection kept open when the client asked for keep-alive.
//
// The port may be reachable by anyone the network lets through, so the server must not be able
// to starve the relay of file descriptors (SECURITY.md): at most kMaxSessions connections at a
// time (further clients wait in the kernel's listen backlog, which costs this process nothing),
// a short deadline for each request and for an idle keep-alive connection, a descriptor reserve
// left to the relay's own connections, and a backoff instead of a busy loop when accept fails
// (EMFILE, ENFILE). No exception leaves the server's thread.
#include "pgoutbox/metrics/http_server.h"

#include <sys/resource.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <algorithm>
#include <functional>
#include <optional>
#include <stdexcept>
#include <thread>

namespace pgoutbox::metrics {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

// The whole of one request (headers and body) must arrive within this, and an idle keep-alive
// connection is closed after it: a scrape or a probe takes milliseconds.
constexpr auto kRequestTimeout = std::chrono::seconds(5);
// Requests are GETs without a body: 8 KiB of headers is plenty, and a body is refused.
constexpr std::uint32_t kMaxHeaderBytes = 8 * 1024;
constexpr std::uint64_t kMaxBodyBytes = 1024;
// Accept failures (EMFILE, ENFILE, ENOBUFS) are retried after this backoff, doubling.
constexpr auto kAcceptBackoffMin = std::chrono::milliseconds(50);
constexpr auto kAcceptBackoffMax = std::chrono::milliseconds(1000);

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

// True when a descriptor numbered `fd` leaves fewer than `reserve` free under the soft limit.
// Descriptors are allocated lowest first, so every number below `fd` is in use.
bool within_reserve(int fd, std::uint64_t reserve) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return false;
  return static_cast<std::uint64_t>(fd) + reserve >= static_cast<std::uint64_t>(limit.rlim_cur);
}

class Session : public std::enable_shared_from_this<Session> {
 public:
  // `on_end` runs when the session is destroyed (the connection closed).
  Session(tcp::socket socket, const Routes& routes, std::function<void()> on_end)
      : stream_(std::move(socket)), routes_(routes), on_end_(std::move(on_end)) {}
  ~Session() { on_end_(); }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  void start() { read(); }

 private:
  void read() {
    parser_.emplace();
    parser_->header_limit(kMaxHeaderBytes);
    parser_->body_limit(kMaxBodyBytes);
    stream_.expires_after(kRequestTimeout);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_read(ec); });
  }

  void on_read(beast::error_code ec) {
    if (ec) {
      // end_of_stream: the client closed; anything else (timeout, garbage): drop the connection.
      beast::error_code ignored;
      stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
      return;
    }
    request_ = parser_->release();
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
  std::function<void()> on_end_;
  beast::flat_buffer buffer_{kMaxHeaderBytes + kMaxBodyBytes};
  std::optional<http::request_parser<http::string_body>> parser_;
  http::request<http::string_body> request_;
  http::response<http::string_body> response_;
};

}  // namespace

class HttpServer::Impl {
 public:
  Impl(const std::string& address, Routes routes, HttpLimits limits)
      : routes_(std::move(routes)), limits_(limits), acceptor_(io_), retry_(io_) {
    limits_.max_sessions = std::max<std::size_t>(limits_.max_sessions, 1);
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
    thread_ = std::thread([this] { serve(); });
  }

  ~Impl() {
    io_.stop();
    thread_.join();
    stopping_ = true;  // sessions still queued are destroyed with io_: they must not accept again
  }

  std::uint16_t port() const { return acceptor_.local_endpoint().port(); }

 private:
  // A handler that throws (a route's builder, an allocation) costs that connection, never the
  // process: the loop goes on with the next handler.
  void serve() {
    for (;;) {
      try {
        io_.run();
        return;
      } catch (const std::exception& e) {
        spdlog::warn("metrics HTTP server: {}", e.what());
      }
    }
  }

  void accept() {
    if (sessions_ >= limits_.max_sessions) {
      accepting_ = false;  // resumed by the next session's end; waiting clients stay in the backlog
      return;
    }
    accepting_ = true;
    acceptor_.async_accept(io_, [this](beast::error_code ec, tcp::socket socket) { on_accept(ec, std::move(socket)); });
  }

  void on_accept(beast::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted) return;
    if (ec) {
      // Out of descriptors (EMFILE, ENFILE) or buffers: retrying at once would spin a core.
      // The pending connection stays queued until a descriptor frees up.
      back_off(ec.message());
      return;
    }
    if (within_reserve(socket.native_handle(), limits_.reserved_descriptors)) {
      // The relay's own connections (Postgres, Kafka) need these descriptors more.
      beast::error_code ignored;
      socket.close(ignored);
      back_off("too few file descriptors left for the relay");
      return;
    }
    accept_failing_ = false;
    backoff_ = kAcceptBackoffMin / 2;
    ++sessions_;
    std::make_shared<Session>(std::move(socket), routes_, [this] {
      --sessions_;
      if (!stopping_ && !accepting_ && !accept_failing_) accept();
    })->start();
    accept();
  }

  // Accepting again only after a delay (50 ms doubling to 1 s) while descriptors are short; said
  // once per episode.
  void back_off(const std::string& why) {
    backoff_ = std::clamp(backoff_ * 2, kAcceptBackoffMin, kAcceptBackoffMax);
    if (!accept_failing_) spdlog::warn("metrics HTTP server cannot accept: {}; backing off", why);
    accept_failing_ = true;
    accepting_ = false;
    retry_.expires_after(backoff_);
    retry_.async_wait([this](beast::error_code wait_ec) {
      if (!wait_ec) accept();
    });
  }

  // Declared before io_: sessions destroyed with io_ still reach them.
  Routes routes_;
  HttpLimits limits_;
  std::size_t sessions_ = 0;  // only touched on the server's thread
  bool accepting_ = false;
  bool accept_failing_ = false;
  bool stopping_ = false;
  std::chrono::milliseconds backoff_ = kAcceptBackoffMin / 2;
  asio::io_context io_;
  tcp::acceptor acceptor_;
  asio::steady_timer retry_;
  std::thread thread_;
};

HttpServer::HttpServer(const std::string& address, Routes routes, HttpLimits limits)
    : impl_(std::make_unique<Impl>(address, std::move(routes), limits)) {}
HttpServer::~HttpServer() = default;
std::uint16_t HttpServer::port() const { return impl_->port(); }

}  // namespace pgoutbox::metrics
