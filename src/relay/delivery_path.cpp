#include "pgoutbox/relay/delivery_path.h"

#include <stdexcept>

#include <spdlog/spdlog.h>

#include "at_least_once.h"
#include "exactly_once.h"

namespace pgoutbox::relay {

std::unique_ptr<DeliveryPath> make_delivery_path(const PathContext& context) {
  if (context.config.delivery == config::Delivery::exactly_once) return std::make_unique<ExactlyOnce>(context);
  return std::make_unique<AtLeastOnce>(context);
}

namespace {

// The broker state and statistics of the producer, for the observer.
void observe(const PathContext& context, kafka::SinkOptions& options) {
  options.on_statistics = [&observer = context.observer](std::string_view json) { observer.kafka_statistics(json); };
  options.on_brokers_up = [&observer = context.observer, up_before = std::optional<bool>()](bool up) mutable {
    // The client reconnects by itself and keeps every record queued meanwhile (I1); this only
    // tells the operator when the state changes.
    if (up_before != up && up && up_before)
      spdlog::info("kafka: a broker is reachable again; queued records are being delivered");
    up_before = up;
    observer.kafka_up(up);
  };
}

}  // namespace

std::optional<Outcome> open_stream_sink(const PathContext& context, SinkHandle& handle, kafka::SinkOptions options,
                                        bool observed) {
  if (observed) observe(context, options);
  try {
    handle.open(context.io, context.sinks(std::move(options)));
  } catch (const std::invalid_argument& e) {
    return Outcome::fatal(Fatal::kafka_config, e.what());
  }
  return std::nullopt;
}

}  // namespace pgoutbox::relay
