#include "identity_provider.h"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/rsa.h>

// Boost 1.74's asio/awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format off
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
// clang-format on
#include <chrono>
#include <random>
#include <stdexcept>
#include <thread>

namespace pgoutbox::test {
namespace {

std::string base64(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int size =
      EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                      reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(static_cast<std::size_t>(size));
  return out;
}

// JWS's encoding of every part (RFC 7515 §2): the URL-safe alphabet, no padding.
std::string base64url(std::string_view bytes) {
  std::string out = base64(bytes);
  for (char& c : out) c = c == '+' ? '-' : c == '/' ? '_' : c;
  while (!out.empty() && out.back() == '=') out.pop_back();
  return out;
}

std::string random_kid() {
  std::random_device rd;
  std::string out = "pgoutbox-test-";
  for (int i = 0; i < 8; ++i) out.push_back("0123456789abcdef"[rd() % 16]);
  return out;
}

// One component of an RSA key as the unsigned big-endian bytes a JWK carries (RFC 7518 §6.3.1).
std::string rsa_component(EVP_PKEY* key, const char* name) {
  BIGNUM* bn = nullptr;
  if (EVP_PKEY_get_bn_param(key, name, &bn) != 1) throw std::runtime_error(std::string("no RSA ") + name);
  std::string bytes(static_cast<std::size_t>(BN_num_bytes(bn)), '\0');
  BN_bn2bin(bn, reinterpret_cast<unsigned char*>(bytes.data()));
  BN_free(bn);
  return bytes;
}

// The value of `name` in an application/x-www-form-urlencoded body; librdkafka does not
// percent-encode what it sends, so neither is anything decoded here.
std::string form_value(const std::string& body, const std::string& name) {
  std::size_t at = 0;
  while (at <= body.size()) {
    const auto end = std::min(body.find('&', at), body.size());
    const std::string_view pair(body.data() + at, end - at);
    if (pair.starts_with(name + "=")) return std::string(pair.substr(name.size() + 1));
    at = end + 1;
  }
  return {};
}

std::int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

struct IdentityProvider::Key {
  EVP_PKEY* pkey = EVP_RSA_gen(2048);
  Key() {
    if (pkey == nullptr) throw std::runtime_error("RSA key generation failed");
  }
  ~Key() { EVP_PKEY_free(pkey); }
  Key(const Key&) = delete;
  Key& operator=(const Key&) = delete;

  // RS256 (RFC 7518 §3.3): RSASSA-PKCS1-v1_5 with SHA-256.
  std::string sign(std::string_view input) const {
    std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
    std::size_t size = 0;
    const auto* data = reinterpret_cast<const unsigned char*>(input.data());
    if (EVP_DigestSignInit(ctx.get(), nullptr, EVP_sha256(), nullptr, pkey) != 1 ||
        EVP_DigestSign(ctx.get(), nullptr, &size, data, input.size()) != 1) {
      throw std::runtime_error("RS256 signing failed");
    }
    std::string signature(size, '\0');
    if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(signature.data()), &size, data, input.size()) != 1) {
      throw std::runtime_error("RS256 signing failed");
    }
    signature.resize(size);
    return signature;
  }
};

namespace {

// One connection: requests read and answered in turn until the client closes it or idles 30 s.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(boost::asio::ip::tcp::socket socket, IdentityProvider& provider)
      : stream_(std::move(socket)), provider_(provider) {}

  void read() {
    request_ = {};
    stream_.expires_after(std::chrono::seconds(30));
    boost::beast::http::async_read(stream_, buffer_, request_,
                                   [self = shared_from_this()](boost::beast::error_code ec, std::size_t) {
                                     if (!ec) self->respond();
                                   });
  }

 private:
  void respond() {
    namespace http = boost::beast::http;
    const auto reply = provider_.answer(std::string(request_.method_string()), std::string(request_.target()),
                                        std::string(request_[http::field::authorization]), request_.body());
    response_ = {};
    response_.version(request_.version());
    response_.result(static_cast<unsigned>(reply.status));
    response_.set(http::field::content_type, "application/json");
    response_.keep_alive(request_.keep_alive());
    response_.body() = reply.body;
    response_.prepare_payload();
    http::async_write(stream_, response_, [self = shared_from_this()](boost::beast::error_code ec, std::size_t) {
      if (ec) return;
      if (self->response_.keep_alive()) {
        self->read();
      } else {
        self->stream_.socket().shutdown(boost::asio::ip::tcp::socket::shutdown_send, ec);
      }
    });
  }

  boost::beast::tcp_stream stream_;
  IdentityProvider& provider_;
  boost::beast::flat_buffer buffer_;
  boost::beast::http::request<boost::beast::http::string_body> request_;
  boost::beast::http::response<boost::beast::http::string_body> response_;
};

}  // namespace

struct IdentityProvider::Server {
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor acceptor{io, {boost::asio::ip::make_address("127.0.0.1"), 0}};
  IdentityProvider& provider;
  std::thread thread;

  explicit Server(IdentityProvider& owner) : provider(owner) {
    accept();
    thread = std::thread([this] { io.run(); });
  }
  ~Server() {
    io.stop();
    thread.join();
  }
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  void accept() {
    acceptor.async_accept([this](boost::beast::error_code ec, boost::asio::ip::tcp::socket socket) {
      if (ec) return;
      std::make_shared<Session>(std::move(socket), provider)->read();
      accept();
    });
  }
  int port() const { return acceptor.local_endpoint().port(); }
};

IdentityProvider::IdentityProvider(std::string client_id, std::string client_secret, std::string issuer,
                                   std::string audience)
    : client_id_(std::move(client_id)),
      client_secret_(std::move(client_secret)),
      issuer_(std::move(issuer)),
      audience_(std::move(audience)),
      kid_(random_kid()),
      key_(std::make_unique<Key>()) {
  jwks_ = R"({"keys":[{"kty":"RSA","use":"sig","alg":"RS256","kid":")" + kid_ + R"(","n":")" +
          base64url(rsa_component(key_->pkey, OSSL_PKEY_PARAM_RSA_N)) + R"(","e":")" +
          base64url(rsa_component(key_->pkey, OSSL_PKEY_PARAM_RSA_E)) + R"("}]})";
  server_ = std::make_unique<Server>(*this);
}

IdentityProvider::~IdentityProvider() { server_.reset(); }

std::string IdentityProvider::token_url() const {
  return "http://127.0.0.1:" + std::to_string(server_->port()) + "/token";
}
std::string IdentityProvider::jwks_url() const {
  return "http://127.0.0.1:" + std::to_string(server_->port()) + "/jwks";
}

std::string IdentityProvider::last_token_request() const {
  const std::lock_guard lock(mutex_);
  return last_token_request_;
}

std::string IdentityProvider::token(const std::string& scope, Mode mode) const {
  const bool expired = mode == Mode::expired;
  const std::string audience = mode == Mode::foreign_audience ? "another-" + audience_ : audience_;
  const std::int64_t iat = unix_now() - (expired ? 7200 : 0);
  const std::int64_t exp = iat + 3600;
  const std::string header = R"({"alg":"RS256","typ":"JWT","kid":")" + kid_ + R"("})";
  std::string claims = R"({"sub":")" + client_id_ + R"(","iss":")" + issuer_ + R"(","aud":")" + audience +
                       R"(","iat":)" + std::to_string(iat) + R"(,"exp":)" + std::to_string(exp);
  if (!scope.empty()) claims += R"(,"scope":")" + scope + R"(")";
  claims += "}";
  const std::string input = base64url(header) + "." + base64url(claims);
  return input + "." + base64url(key_->sign(input));
}

IdentityProvider::Reply IdentityProvider::answer(const std::string& method, const std::string& target,
                                                 const std::string& authorization, const std::string& body) {
  if (method == "GET" && target == "/jwks") return {200, jwks_};
  if (method != "POST" || target != "/token") return {404, R"({"error":"not_found"})"};
  {
    const std::lock_guard lock(mutex_);
    last_token_request_ = body;
  }
  const Mode mode = mode_;
  if (mode == Mode::refuse || authorization != "Basic " + base64(client_id_ + ":" + client_secret_)) {
    return {401, R"({"error":"invalid_client","error_description":"client authentication failed"})"};
  }
  if (form_value(body, "grant_type") != "client_credentials") return {400, R"({"error":"unsupported_grant_type"})"};
  ++tokens_issued_;
  return {200, R"({"access_token":")" + token(form_value(body, "scope"), mode) +
                   R"(","token_type":"Bearer","expires_in":3600})"};
}

}  // namespace pgoutbox::test
