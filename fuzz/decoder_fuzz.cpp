// libFuzzer target for the pgoutput decoder (docs/style.md §4: a hostile message is an error value,
// never a crash). Each input is decoded under all four DecodeOptions combinations, since the
// same bytes mean different layouts inside and outside a stream and with parallel streaming
// (docs/pgoutput.md §3). libFuzzer hands over an exactly-sized heap copy of the input, so ASan
// reports any read past its end; every byte of every returned view is read for the same reason.
// Relation results also go through RelationCache::apply.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <variant>

#include "pgoutbox/pgoutput/decoder.h"
#include "pgoutbox/pgoutput/relation_cache.h"

namespace {

using namespace pgoutbox::pgoutput;

// Invariants the decoder promises; a violation stops the fuzzer like a crash would.
void require(bool condition) {
  if (!condition) __builtin_trap();
}

struct Toucher {
  std::span<const std::byte> input;
  unsigned sum = 0;

  void touch(std::string_view v) {
    if (v.empty()) return;
    const auto* begin = reinterpret_cast<const char*>(input.data());
    require(v.data() >= begin && v.data() + v.size() <= begin + input.size());
    for (const char c : v) sum = sum * 31U + static_cast<unsigned char>(c);
  }
  void touch(const TupleData& t) {
    for (const auto& c : t.columns) {
      require(c.kind == ColumnKind::text || c.kind == ColumnKind::binary || c.bytes.empty());
      touch(c.bytes);
    }
  }

  void operator()(const OriginData& m) { touch(m.name); }
  void operator()(const RelationData& m) {
    touch(m.nspname);
    touch(m.relname);
    for (const auto& c : m.columns) touch(c.name);
  }
  void operator()(const TypeData& m) {
    touch(m.nspname);
    touch(m.typname);
  }
  void operator()(const InsertData& m) { touch(m.new_tuple); }
  void operator()(const UpdateData& m) {
    require(m.old_tuple.has_value() == (m.old_kind != 0));
    if (m.old_tuple) touch(*m.old_tuple);
    touch(m.new_tuple);
  }
  void operator()(const DeleteData& m) { touch(m.old_tuple); }
  void operator()(const MessageData& m) {
    touch(m.prefix);
    touch(m.content);
  }
  void operator()(const BeginPrepareData& m) { touch(m.gid); }
  void operator()(const PrepareData& m) { touch(m.gid); }
  void operator()(const CommitPreparedData& m) { touch(m.gid); }
  void operator()(const RollbackPreparedData& m) { touch(m.gid); }
  template <typename T>
  void operator()(const T&) {}  // fixed-size messages hold no views
};

void exercise_cache(RelationCache& cache, const RelationData& message) {
  const Relation& stored = cache.apply(message);
  require(cache.find(message.relid) == &stored);
  require(stored.columns.size() == message.columns.size());
  require(message.nspname.empty() ? stored.nspname == "pg_catalog" : stored.nspname == message.nspname);
  for (std::size_t i = 0; i < stored.columns.size(); ++i) {
    // Duplicate names are possible in hostile input: the first one wins.
    const int index = stored.column_index(stored.columns[i].name);
    require(index >= 0 && static_cast<std::size_t>(index) <= i);
  }
  const std::uint64_t generation = stored.generation;
  require(cache.apply(message).generation > generation);  // a repeat replaces, too
}

volatile unsigned g_sink = 0;  // keeps the byte reads from being optimised away

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> input(reinterpret_cast<const std::byte*>(data), size);
  RelationCache cache;
  for (const bool in_stream : {false, true}) {
    for (const bool parallel : {false, true}) {
      const DecodeResult result = decode(input, DecodeOptions{in_stream, parallel});
      if (!result.ok()) {
        const DecodeError& error = result.error();
        require(error.offset <= size);
        require(error.kind == (size == 0 ? 0 : static_cast<char>(data[0])));
        require(!error.reason.empty());
        g_sink = g_sink + static_cast<unsigned>(error.to_string().size());
        continue;
      }
      Toucher toucher{input};
      std::visit(toucher, result.message());
      g_sink = g_sink + toucher.sum;
      if (const auto* relation = std::get_if<RelationData>(&result.message())) exercise_cache(cache, *relation);
    }
  }
  return 0;
}
