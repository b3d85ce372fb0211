#include "sink_handle.h"

#include <unistd.h>

namespace pgoutbox::relay {

SinkHandle::~SinkHandle() {
  if (wakeup_) {
    boost::system::error_code ignored;
    wakeup_->close(ignored);
  }
}

void SinkHandle::open(boost::asio::io_context& io, std::unique_ptr<kafka::Sink> sink) {
  sink_ = std::move(sink);
  wakeup_.emplace(io, ::dup(sink_->wakeup_fd()));
  wait();
}

void SinkHandle::wait() {
  wakeup_->async_wait(boost::asio::posix::stream_descriptor::wait_read,
                      [this, alive = std::weak_ptr<int>(alive_)](const boost::system::error_code& ec) {
                        if (ec || alive.expired()) return;
                        sink_->drain_wakeup();
                        sink_->poll();
                        wait();
                      });
}

}  // namespace pgoutbox::relay
