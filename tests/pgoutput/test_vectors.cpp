#include "test_vectors.h"

#include <utility>

namespace pgoutbox::pgoutput::testing {

namespace {
std::deque<TestVector>& storage() {
  static std::deque<TestVector> vectors;  // deque: push_back keeps earlier references valid
  return vectors;
}
}  // namespace

const Bytes& register_vector(std::string name, Bytes bytes, DecodeOptions options) {
  storage().push_back(TestVector{std::move(name), std::move(bytes), options});
  return storage().back().bytes;
}

const std::deque<TestVector>& registered_vectors() { return storage(); }

}  // namespace pgoutbox::pgoutput::testing
