#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

namespace pgoutbox::test {

// An OAuth 2.0 identity provider on loopback for SASL/OAUTHBEARER tests, served over plain HTTP
// on a free port by a thread of its own:
//  - GET /jwks: a JSON Web Key Set (RFC 7517) holding the public half of an RSA-2048 key made
//    when the provider starts, with a key id ("kid"), as a broker's
//    sasl.oauthbearer.jwks.endpoint.url reads it;
//  - POST /token: the client-credentials grant (RFC 6749 §4.4), as librdkafka's
//    sasl.oauthbearer.method=oidc asks it: `grant_type=client_credentials[&scope=…]` with the
//    client authenticated by HTTP Basic (§2.3.1). It answers an RS256-signed JWT (RFC 7519) with
//    sub (the client id), iss, aud, iat, exp and scope, or 401 invalid_client (§5.2) for any
//    other client.
// `set_mode` switches what the token endpoint hands out, for the negative cases.
class IdentityProvider {
 public:
  enum class Mode {
    valid,             // tokens valid for an hour
    expired,           // tokens that expired an hour ago (a provider whose clock is behind, or a stale cache)
    refuse,            // 401 invalid_client to every client, as for a wrong secret or a deleted client
    foreign_audience,  // valid tokens for another audience, which the broker must refuse
  };

  IdentityProvider(std::string client_id, std::string client_secret, std::string issuer, std::string audience);
  ~IdentityProvider();
  IdentityProvider(const IdentityProvider&) = delete;
  IdentityProvider& operator=(const IdentityProvider&) = delete;

  std::string token_url() const;  // http://127.0.0.1:PORT/token
  std::string jwks_url() const;   // http://127.0.0.1:PORT/jwks
  const std::string& issuer() const { return issuer_; }
  const std::string& audience() const { return audience_; }

  void set_mode(Mode mode) { mode_ = mode; }
  // Tokens handed out so far, and the form body of the last token request.
  int tokens_issued() const { return tokens_issued_; }
  std::string last_token_request() const;

  // The answer to one request (always JSON), for the HTTP side (Boost.Beast, in the .cpp).
  struct Reply {
    int status = 200;
    std::string body;
  };
  Reply answer(const std::string& method, const std::string& target, const std::string& authorization,
               const std::string& body);

 private:
  std::string token(const std::string& scope, Mode mode) const;

  struct Server;

  std::string client_id_;
  std::string client_secret_;
  std::string issuer_;
  std::string audience_;
  std::string kid_;
  struct Key;
  std::unique_ptr<Key> key_;
  std::string jwks_;
  std::atomic<Mode> mode_{Mode::valid};
  std::atomic<int> tokens_issued_{0};
  mutable std::mutex mutex_;
  std::string last_token_request_;
  std::unique_ptr<Server> server_;
};

}  // namespace pgoutbox::test
