#pragma once

// One Kafka producer of a session and its wake-up descriptor on the io_context: the sink says
// "reports are waiting" through the descriptor, and the handle serves them (poll) on the
// io_context's thread. Closing the handle, or destroying it, stops the waiting; a wake-up
// already queued then finds the handle gone and does nothing.

#include <memory>
#include <optional>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>

#include "pgoutbox/kafka/sink.h"
#include "pgoutbox/relay/delivery_path.h"

namespace pgoutbox::relay {

class SinkHandle {
 public:
  SinkHandle() = default;
  ~SinkHandle();
  SinkHandle(const SinkHandle&) = delete;
  SinkHandle& operator=(const SinkHandle&) = delete;

  void open(boost::asio::io_context& io, std::unique_ptr<kafka::Sink> sink);
  bool is_open() const { return sink_ != nullptr; }
  kafka::Sink& operator*() const { return *sink_; }
  kafka::Sink* operator->() const { return sink_.get(); }
  // Serves waiting reports, if open.
  void poll() const {
    if (sink_) sink_->poll();
  }

 private:
  void wait();

  std::unique_ptr<kafka::Sink> sink_;
  std::optional<boost::asio::posix::stream_descriptor> wakeup_;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);  // its handlers hold it weakly
};

// Opens the producer of the stream's records into `handle`, with `options` (its reports, a
// transactional id) and, when `observed`, the broker state and statistics for the observer (one
// producer of a session reports them). An outcome: the Kafka configuration is refused.
std::optional<Outcome> open_stream_sink(const PathContext& context, SinkHandle& handle, kafka::SinkOptions options,
                                        bool observed = true);

}  // namespace pgoutbox::relay
