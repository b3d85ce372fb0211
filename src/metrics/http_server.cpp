// HTTP/1.1 with Boost.Beast: one acceptor and one async session per connection, all on one
// io_context run by the server's own thread (so no strand and no locking). Requests are small
// (probes and scrapes): each is read whole with small parser limits, answered from its route,
// and the connection kept open when the client asked for keep-alive.
//
// The port may be reachable by anyone the network lets through (SECURITY.md "The metrics
// port"). Two things must hold whatever its clients do: the relay keeps the descriptors it needs,
// and a probe that arrives now is answered now, whatever connections came before it (Kubernetes
// restarts the relay when /healthz is slow). So every pending connection is accepted at once,
// never left in the kernel's listen backlog, where 2,000 idle ones would queue a probe behind
// them for minutes; at most max_connections are held, and a new one closes the connection that
// has been waiting longest for a request (then, if none is, the oldest one being answered).
// Idle connections, which send nothing, are what is closed: a probe's own connection carries its
// request within milliseconds. Each connection has a deadline for its request and bounded
// buffers, a descriptor reserve is left to the relay's own connections, and accept failures
// (EMFILE, ENFILE) back off instead of spinning. No exception leaves the server's thread.
// A request whose Host is not an IP address, localhost or a listed name is answered 421 (DNS
// rebinding: SECURITY.md "The metrics port").
#include "pgoutbox/metrics/http_server.h"

#include <sys/resource.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <algorithm>
#include <cctype>
#include <functional>
#include <list>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <vector>

namespace pgoutbox::metrics {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

// The whole of one request (headers and body) must arrive within this, and an idle keep-alive
// connection is closed after it; so must a response be written: a scrape or a probe takes
// milliseconds.
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

// A port in a Host header: 1 to 5 digits (RFC 3986 3.2.3, its value not checked: any is ours).
bool is_port(std::string_view text) {
  return !text.empty() && text.size() <= 5 &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::string lower_name(std::string_view name) {
  std::string out(name);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  // "localhost." is "localhost": a fully qualified name's final dot (RFC 1034 3.1).
  if (!out.empty() && out.back() == '.') out.pop_back();
  return out;
}

// DNS rebinding: a page in a browser that can reach this port makes a name of its own resolve
// to the port's address, and then reads it as that name's origin; the browser sends the name as
// Host (RFC 9110 7.2). Prometheus, the kubelet's probes and curl send the address they connect
// to, so an IP address (v4, or v6 in brackets), localhost or a name the operator listed is
// answered, each with or without a port. A request without Host (HTTP/1.0) is answered too: no
// browser sends one.
bool host_allowed(std::string_view host, const std::vector<std::string>& names) {
  if (host.empty()) return true;
  beast::error_code ec;
  if (host.front() == '[') {
    const auto close = host.find(']');
    if (close == std::string_view::npos) return false;
    const auto rest = host.substr(close + 1);
    if (!rest.empty() && (rest.front() != ':' || !is_port(rest.substr(1)))) return false;
    asio::ip::make_address_v6(std::string(host.substr(1, close - 1)), ec);
    return !ec;
  }
  std::string_view name = host;
  if (const auto colon = host.rfind(':'); colon != std::string_view::npos) {
    if (!is_port(host.substr(colon + 1))) return false;
    name = host.substr(0, colon);
  }
  // Dotted decimal only (inet_pton): 127.1 and 0x7f.0.0.1 are names, and refused.
  asio::ip::make_address_v4(std::string(name), ec);
  if (!ec) return true;
  const std::string lowered = lower_name(name);
  return lowered == "localhost" || std::find(names.begin(), names.end(), lowered) != names.end();
}

std::string_view host_of(const http::request<http::string_body>& request) {
  const auto host = request[http::field::host];
  return {host.data(), host.size()};
}

// True when a descriptor numbered `fd` leaves fewer than `reserve` free under the soft limit.
// Descriptors are allocated lowest first, so every number below `fd` is in use.
bool within_reserve(int fd, std::uint64_t reserve) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return false;
  return static_cast<std::uint64_t>(fd) + reserve >= static_cast<std::uint64_t>(limit.rlim_cur);
}

class Session;

// The open connections in the order they would be closed to make room: those waiting for a
// request (a new connection, or a keep-alive one between requests) before those being answered,
// each oldest first. Only touched on the server's thread.
class Connections {
 public:
  enum class State { waiting, answering };
  using List = std::list<Session*>;

  std::size_t size() const { return waiting_.size() + answering_.size(); }
  List::iterator add(Session* s, State state) { return list(state).insert(list(state).end(), s); }
  List::iterator move(List::iterator at, State from, State to) {
    list(to).splice(list(to).end(), list(from), at);
    return at;
  }
  void remove(List::iterator at, State state) { list(state).erase(at); }
  // The connection to close for a new one; nullptr when there is none.
  Session* first_to_close() const {
    if (!waiting_.empty()) return waiting_.front();
    return answering_.empty() ? nullptr : answering_.front();
  }

 private:
  List& list(State state) { return state == State::waiting ? waiting_ : answering_; }
  List waiting_;
  List answering_;
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, const Routes& routes, const std::vector<std::string>& allowed_hosts,
          Connections& connections)
      : stream_(std::move(socket)), routes_(routes), allowed_hosts_(allowed_hosts), connections_(connections) {}
  ~Session() { forget(); }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  void start() {
    at_ = connections_.add(this, state_);
    counted_ = true;
    read();
  }

  // Closes the connection now (its descriptor is free at once); the pending operation then ends
  // with operation_aborted and releases the session.
  void close() {
    forget();
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
  }

 private:
  void set_state(Connections::State state) {
    if (!counted_ || state == state_) return;
    at_ = connections_.move(at_, state_, state);
    state_ = state;
  }

  void forget() {
    if (!counted_) return;
    connections_.remove(at_, state_);
    counted_ = false;
  }

  void read() {
    set_state(Connections::State::waiting);
    parser_.emplace();
    parser_->header_limit(kMaxHeaderBytes);
    parser_->body_limit(kMaxBodyBytes);
    stream_.expires_after(kRequestTimeout);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_read(ec); });
  }

  void on_read(beast::error_code ec) {
    if (ec) {
      // end_of_stream: the client closed; anything else (timeout, garbage, closed to make room):
      // drop the connection.
      close();
      return;
    }
    set_state(Connections::State::answering);
    request_ = parser_->release();
    parser_.reset();
    response_ = respond();
    stream_.expires_after(kRequestTimeout);
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
    if (request_.count(http::field::host) > 1 || !host_allowed(host_of(request_), allowed_hosts_)) {
      // 421: this server does not answer for that name (RFC 9110 15.5.20). The name is not echoed.
      answer = HttpResponse{421, "text/plain; charset=utf-8",
                            "pgoutbox answers an IP address, localhost or a name listed in metrics_allowed_hosts as "
                            "Host\n"};
    } else if (route == routes_.end()) {
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
    if (ec || !response_.keep_alive()) {
      close();
      return;
    }
    // The response is sent: its memory is not held while the client thinks of its next request.
    response_ = {};
    request_ = {};
    read();
  }

  beast::tcp_stream stream_;
  const Routes& routes_;
  const std::vector<std::string>& allowed_hosts_;
  Connections& connections_;
  Connections::List::iterator at_;
  Connections::State state_ = Connections::State::waiting;
  bool counted_ = false;  // in connections_: open, and not closed to make room
  beast::flat_buffer buffer_{kMaxHeaderBytes + kMaxBodyBytes};
  std::optional<http::request_parser<http::string_body>> parser_;
  http::request<http::string_body> request_;
  http::response<http::string_body> response_;
};

}  // namespace

class HttpServer::Impl {
 public:
  Impl(const std::string& address, Routes routes, HttpLimits limits, std::vector<std::string> allowed_hosts)
      : routes_(std::move(routes)),
        limits_(limits),
        allowed_hosts_(lower_names(std::move(allowed_hosts))),
        acceptor_(io_),
        retry_(io_) {
    limits_.max_connections = std::max<std::size_t>(limits_.max_connections, 1);
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
  }

  std::uint16_t port() const { return acceptor_.local_endpoint().port(); }

 private:
  static std::vector<std::string> lower_names(std::vector<std::string> names) {
    for (auto& name : names) name = lower_name(name);
    return names;
  }

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
    // Room for the new connection: past the cap, or when its descriptor is one the relay's own
    // connections (Postgres, Kafka) may need, the connection that has waited longest for a
    // request goes. The newest is kept: it is the one most likely to carry a request now.
    const bool reserve = within_reserve(socket.native_handle(), limits_.reserved_descriptors);
    if (reserve || connections_.size() >= limits_.max_connections) {
      Session* oldest = connections_.first_to_close();
      if (oldest == nullptr) {
        // Nothing of the server's to give back: the descriptor is the relay's.
        beast::error_code ignored;
        socket.close(ignored);
        back_off("too few file descriptors left for the relay");
        return;
      }
      oldest->close();
    }
    accept_failing_ = false;
    backoff_ = kAcceptBackoffMin / 2;
    std::make_shared<Session>(std::move(socket), routes_, allowed_hosts_, connections_)->start();
    accept();
  }

  // Accepting again only after a delay (50 ms doubling to 1 s) while descriptors are short; said
  // once per episode.
  void back_off(const std::string& why) {
    backoff_ = std::clamp(backoff_ * 2, kAcceptBackoffMin, kAcceptBackoffMax);
    if (!accept_failing_) spdlog::warn("metrics HTTP server cannot accept: {}; backing off", why);
    accept_failing_ = true;
    retry_.expires_after(backoff_);
    retry_.async_wait([this](beast::error_code wait_ec) {
      if (!wait_ec) accept();
    });
  }

  // Declared before io_: sessions destroyed with io_ still reach them.
  Routes routes_;
  HttpLimits limits_;
  std::vector<std::string> allowed_hosts_;
  Connections connections_;
  bool accept_failing_ = false;
  std::chrono::milliseconds backoff_ = kAcceptBackoffMin / 2;
  asio::io_context io_;
  tcp::acceptor acceptor_;
  asio::steady_timer retry_;
  std::thread thread_;
};

HttpServer::HttpServer(const std::string& address, Routes routes, HttpLimits limits,
                       std::vector<std::string> allowed_hosts)
    : impl_(std::make_unique<Impl>(address, std::move(routes), limits, std::move(allowed_hosts))) {}
HttpServer::~HttpServer() = default;
std::uint16_t HttpServer::port() const { return impl_->port(); }

}  // namespace pgoutbox::metrics
