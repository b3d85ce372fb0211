#pragma once

// Every message vector the decoder tests build or capture is registered here, so the
// robustness sweep (decoder_robustness_test.cpp) truncates and extends each one of them.

#include <deque>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>

#include "message_builder.h"
#include "pgoutbox/pgoutput/decoder.h"

namespace pgoutbox::pgoutput::testing {

struct TestVector {
  std::string name;
  Bytes bytes;
  DecodeOptions options;
};

// Stores the vector for the sweep and returns the stored bytes (stable for the whole run).
const Bytes& register_vector(std::string name, Bytes bytes, DecodeOptions options = {});
const std::deque<TestVector>& registered_vectors();

inline constexpr DecodeOptions kInStream{.in_stream = true, .parallel_streaming = false};
inline constexpr DecodeOptions kParallel{.in_stream = false, .parallel_streaming = true};

// Decodes and unwraps to the expected message type; a decode error or another message type
// throws, which GoogleTest reports as a failure of the calling test.
template <typename T>
T decode_to(const Bytes& bytes, const DecodeOptions& options = {}) {
  DecodeResult result = decode(bytes, options);
  if (!result.ok()) throw std::runtime_error("unexpected decode error: " + result.error().to_string());
  return std::get<T>(result.message());
}

inline std::string_view text(const Bytes& bytes) { return {reinterpret_cast<const char*>(bytes.data()), bytes.size()}; }

// True when `view` lies inside `bytes`: decoded strings are views into the input, not copies.
inline bool points_into(std::string_view view, const Bytes& bytes) {
  const auto* begin = reinterpret_cast<const char*>(bytes.data());
  return view.data() >= begin && view.data() + view.size() <= begin + bytes.size();
}

}  // namespace pgoutbox::pgoutput::testing
