#include "http_get.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <sstream>

namespace pgoutbox::test {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = boost::asio::ip::tcp;

// Asynchronous calls: beast::tcp_stream's deadline applies to those only, and a test that waits
// on a server that never answers must end at `timeout`.
HttpResult http_request(const std::string& host, int port, const std::string& method, const std::string& target,
                        std::chrono::milliseconds timeout, const std::optional<std::string>& host_header) {
  boost::asio::io_context io;
  beast::tcp_stream stream(io);
  beast::error_code ec;
  tcp::resolver resolver(io);
  const auto endpoints = resolver.resolve(host, std::to_string(port), ec);
  if (ec) return {};
  http::request<http::empty_body> req(http::string_to_verb(method), target, 11);
  const bool v6 = host.find(':') != std::string::npos;
  const std::string host_value = host_header.value_or((v6 ? "[" + host + "]" : host) + ":" + std::to_string(port));
  if (!host_value.empty()) req.set(http::field::host, host_value);  // "": no Host header, as HTTP/1.0 allows
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  if (method == "HEAD") parser.skip(true);
  bool answered = false;
  stream.expires_after(timeout);  // one deadline for connect, request and response together
  stream.async_connect(endpoints, [&](beast::error_code connect_ec, const tcp::endpoint&) {
    if (connect_ec) return;
    http::async_write(stream, req, [&](beast::error_code write_ec, std::size_t) {
      if (write_ec) return;
      http::async_read(stream, buffer, parser, [&](beast::error_code read_ec, std::size_t) { answered = !read_ec; });
    });
  });
  io.run();
  if (!answered) return {};
  auto res = parser.release();
  stream.socket().shutdown(tcp::socket::shutdown_both, ec);
  return {res.result_int(), std::string(res[http::field::content_type]), res.body()};
}

HttpResult http_get(const std::string& host, int port, const std::string& target, std::chrono::milliseconds timeout) {
  return http_request(host, port, "GET", target, timeout);
}

std::optional<double> sample_sum(const std::string& exposition, const std::string& name,
                                 const std::string& label_filter) {
  std::optional<double> sum;
  std::istringstream in(exposition);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#' || line.compare(0, name.size(), name) != 0) continue;
    if (line.size() == name.size() || (line[name.size()] != '{' && line[name.size()] != ' ')) continue;
    const auto space = line.rfind(' ');
    const std::string labels = line.substr(name.size(), space - name.size());
    if (!label_filter.empty() && labels.find(label_filter) == std::string::npos) continue;
    sum = sum.value_or(0) + std::stod(line.substr(space + 1));
  }
  return sum;
}

}  // namespace pgoutbox::test
