#pragma once

#include <optional>
#include <string>

#include "child_process.h"

namespace pgoutbox::test {

// A throwaway certificate authority made with the openssl command line (EC P-256 keys, valid
// for two days), for servers and clients that tests start with TLS.
class TestCa {
 public:
  struct Issued {
    std::string cert;  // PEM certificate path
    std::string key;   // PEM private key path (unencrypted, mode 0600)
  };

  // Creates `dir`/`name`.key and `dir`/`name`.crt; `dir` must exist.
  TestCa(std::string dir, std::string name);

  const std::string& cert() const { return cert_; }
  // A certificate for `common_name` signed by this CA, with `subject_alt_name` when given
  // ("DNS:localhost,IP:127.0.0.1"). Files are `dir`/`file`.crt and .key; with `owner`, both
  // are chowned to that account (a server refuses a key another user can read).
  Issued issue(const std::string& file, const std::string& common_name, const std::string& subject_alt_name = "",
               const std::optional<RunAs>& owner = std::nullopt) const;
  // `issued`'s key followed by its certificate in one file, `dir`/`file`.pem: what a server
  // taking a PEM keystore reads (Kafka's ssl.keystore.type=PEM). Returns its path.
  std::string pem_keystore(const Issued& issued, const std::string& file) const;

 private:
  std::string dir_;
  std::string name_;
  std::string cert_;
  std::string key_;
};

}  // namespace pgoutbox::test
