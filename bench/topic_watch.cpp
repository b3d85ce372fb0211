#include "topic_watch.h"

#include <stdexcept>

#include "eventually.h"

namespace pgoutbox::bench {

TopicWatch::TopicWatch(const std::string& bootstrap, std::string topic, int partitions)
    : client_(test::make_client(RD_KAFKA_CONSUMER, {{"bootstrap.servers", bootstrap}})),
      topic_(std::move(topic)),
      partitions_(partitions) {
  // A topic just created has no leaders for a moment; wait until every partition answers.
  const bool ready = test::eventually(
      [&] {
        try {
          count();
          return true;
        } catch (const std::runtime_error&) {
          return false;
        }
      },
      std::chrono::seconds(30));
  if (!ready) count();  // throws with the broker's error
}

std::int64_t TopicWatch::count() const {
  std::int64_t total = 0;
  for (int p = 0; p < partitions_; ++p) {
    int64_t low = 0, high = 0;
    const auto err = rd_kafka_query_watermark_offsets(client_.get(), topic_.c_str(), p, &low, &high, 5000);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      throw std::runtime_error("watermarks of " + topic_ + ": " + rd_kafka_err2str(err));
    }
    total += high;
  }
  return total;
}

}  // namespace pgoutbox::bench
