#include "pgoutbox/kafka/producer_sink.h"

#include "pgoutbox/kafka/producer.h"

namespace pgoutbox::kafka {
namespace {

class ProducerSink final : public Sink {
 public:
  ProducerSink(const ProducerSettings& settings, std::function<void(const Delivery&)> on_delivery)
      : queue_bytes_(std::stoull(effective_properties(settings).at("queue.buffering.max.kbytes")) * 1024),
        producer_(settings, [on_delivery = std::move(on_delivery)](const DeliveryReport& report) {
          Delivery d;
          d.cookie = report.cookie;
          if (!report.ok()) d.error = delivery_error(report.error);
          d.topic = report.topic;
          d.weight = report.weight;
          d.record = report.record;
          on_delivery(d);
        }) {}

  Produced produce(const outbox::Record& record, std::uint64_t cookie, DeliveryError& error) override {
    rd_kafka_resp_err_t code = RD_KAFKA_RESP_ERR_NO_ERROR;
    switch (producer_.produce(record, cookie, code)) {
      case Producer::Produced::ok:
        return Produced::ok;
      case Producer::Produced::queue_full:
        // The record alone is larger than the whole queue (queue.buffering.max.kbytes): waiting
        // would never make room for it.
        if (record_bytes(record) > queue_bytes_) {
          error =
              DeliveryError{.kind = DeliveryFailure::permanent,
                            .code = "_QUEUE_FULL",
                            .text = "the record is larger than the producer's whole queue (queue.buffering.max.kbytes)",
                            .size_refusal = true};
          return Produced::failed;
        }
        return Produced::queue_full;
      case Producer::Produced::failed:
        break;
    }
    error = delivery_error(code);
    return Produced::failed;
  }
  void poll() override { producer_.poll(); }
  void send_now() override { producer_.send_now(); }
  bool flush(std::chrono::milliseconds timeout) override { return producer_.flush(timeout); }
  int wakeup_fd() const override { return producer_.report_fd(); }
  void drain_wakeup() override { producer_.drain_report_fd(); }
  std::optional<SinkFatal> fatal() const override { return producer_.fatal(); }
  TxnResult init_transactions(std::chrono::milliseconds timeout) override {
    return producer_.init_transactions(timeout);
  }
  TxnResult begin_transaction() override { return producer_.begin_transaction(); }
  TxnResult commit_transaction(std::chrono::milliseconds timeout) override {
    return producer_.commit_transaction(timeout);
  }
  TxnResult abort_transaction(std::chrono::milliseconds timeout) override {
    return producer_.abort_transaction(timeout);
  }

 private:
  // What librdkafka counts against queue.buffering.max.kbytes.
  static std::uint64_t record_bytes(const outbox::Record& record) {
    std::uint64_t n = record.weight();
    for (const auto& h : record.headers) n += h.name.size() + h.value.size();
    return n;
  }

  std::uint64_t queue_bytes_;
  Producer producer_;
};

}  // namespace

SinkFactory producer_sink_factory(SinkSettings base) {
  return [base = std::move(base)](SinkOptions options) -> std::unique_ptr<Sink> {
    ProducerSettings settings;
    settings.brokers = base.brokers;
    settings.properties = base.properties;
    settings.max_in_flight_records = base.max_in_flight_records;
    settings.max_in_flight_bytes = base.max_in_flight_bytes;
    settings.batch_limit = base.batch_limit;
    if (options.isolated) {
      // Kafka refuses a whole batch when one record in it is refused, so a verdict about one
      // record needs a batch of one.
      settings.properties["batch.num.messages"] = "1";
      settings.properties["linger.ms"] = "0";
      settings.properties["client.id"] = "pgoutbox-isolated";
      settings.report_records = true;
    }
    // Without it, librdkafka bumps the idempotent producer's epoch after a batch refused for good
    // and writes the partition's later batches, ahead of the refused records sent again.
    if (options.gapless) settings.properties["enable.gapless.guarantee"] = "true";
    settings.transactional_id = options.transactional_id;
    settings.on_statistics = std::move(options.on_statistics);
    settings.on_brokers_up = std::move(options.on_brokers_up);
    return std::make_unique<ProducerSink>(settings, std::move(options.on_delivery));
  };
}

}  // namespace pgoutbox::kafka
