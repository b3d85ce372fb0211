// The fuzzer's seed corpus (fuzz/corpus/decoder, written by fuzz/make_decoder_corpus.py) must
// hold valid messages of every kind: a seed that does not decode starts the fuzzer on the error
// paths only.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "message_builder.h"
#include "pgoutbox/pgoutput/decoder.h"

namespace pgoutbox::pgoutput::testing {
namespace {

Bytes read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Bytes out;
  for (const char c : data) out.push_back(static_cast<std::byte>(c));
  return out;
}

TEST(DecoderSeedCorpus, EverySeedDecodesAndEveryKindHasOne) {
  std::string kinds;
  int seeds = 0;
  for (const auto& entry : std::filesystem::directory_iterator(PGOUTBOX_DECODER_CORPUS_DIR)) {
    const Bytes bytes = read_file(entry.path());
    ASSERT_FALSE(bytes.empty()) << entry.path();
    bool decoded = false;
    for (const bool in_stream : {false, true}) {
      for (const bool parallel : {false, true}) decoded = decoded || decode(bytes, {in_stream, parallel}).ok();
    }
    EXPECT_TRUE(decoded) << entry.path() << " decodes under no DecodeOptions";
    kinds += static_cast<char>(bytes[0]);
    ++seeds;
  }
  EXPECT_GE(seeds, 19);
  for (const char kind : std::string("BCORYIUDTMSEcAbPpKr")) {
    EXPECT_NE(kinds.find(kind), std::string::npos) << "no seed of kind '" << kind << "'";
  }
}

}  // namespace
}  // namespace pgoutbox::pgoutput::testing
