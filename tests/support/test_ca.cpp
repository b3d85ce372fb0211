#include "test_ca.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <stdexcept>

namespace pgoutbox::test {
namespace {

void openssl(const std::string& args, const std::string& log) {
  const std::string command = "openssl " + args + " >>" + log + " 2>&1";
  if (std::system(command.c_str()) != 0) throw std::runtime_error("failed: " + command + "\n" + tail_of(log));
}

const char* kNewKey = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";

}  // namespace

TestCa::TestCa(std::string dir, std::string name)
    : dir_(std::move(dir)),
      name_(std::move(name)),
      cert_(dir_ + "/" + name_ + ".crt"),
      key_(dir_ + "/" + name_ + ".key") {
  openssl(std::string("req -x509 ") + kNewKey + " -days 2 -subj '/CN=pgoutbox test " + name_ + "' -keyout " + key_ +
              " -out " + cert_,
          dir_ + "/openssl.log");
  ::chmod(cert_.c_str(), 0644);
}

TestCa::Issued TestCa::issue(const std::string& file, const std::string& common_name,
                             const std::string& subject_alt_name, const std::optional<RunAs>& owner) const {
  const std::string base = dir_ + "/" + file;
  const std::string log = dir_ + "/openssl.log";
  Issued out{base + ".crt", base + ".key"};
  openssl(
      std::string("req ") + kNewKey + " -subj '/CN=" + common_name + "' -keyout " + out.key + " -out " + base + ".csr",
      log);
  std::string extensions;
  if (!subject_alt_name.empty()) {
    std::ofstream ext(base + ".ext");
    ext << "subjectAltName=" << subject_alt_name << "\n";
    extensions = " -extfile " + base + ".ext";
  }
  openssl("x509 -req -days 2 -in " + base + ".csr -CA " + cert_ + " -CAkey " + key_ + " -CAcreateserial -out " +
              out.cert + extensions,
          log);
  ::chmod(out.key.c_str(), 0600);
  ::chmod(out.cert.c_str(), 0644);
  if (owner) {
    if (::chown(out.key.c_str(), owner->uid, owner->gid) != 0 ||
        ::chown(out.cert.c_str(), owner->uid, owner->gid) != 0) {
      throw std::runtime_error("cannot chown " + base + ".{crt,key}");
    }
  }
  return out;
}

std::string TestCa::pem_keystore(const Issued& issued, const std::string& file) const {
  const std::string path = dir_ + "/" + file + ".pem";
  std::ofstream out(path);
  for (const auto& part : {issued.key, issued.cert}) {
    std::ifstream in(part);
    out << in.rdbuf();
  }
  out.close();
  ::chmod(path.c_str(), 0600);
  return path;
}

}  // namespace pgoutbox::test
