#include "pgoutbox/kafka/describe_configs.h"

#include <memory>

namespace pgoutbox::kafka {

DescribedConfig describe_config(rd_kafka_t* rk, rd_kafka_ResourceType_t type, const std::string& name,
                                std::chrono::milliseconds timeout) {
  const std::unique_ptr<rd_kafka_ConfigResource_t, decltype(&rd_kafka_ConfigResource_destroy)> resource(
      rd_kafka_ConfigResource_new(type, name.c_str()), &rd_kafka_ConfigResource_destroy);
  const std::unique_ptr<rd_kafka_queue_t, decltype(&rd_kafka_queue_destroy)> queue(rd_kafka_queue_new(rk),
                                                                                   &rd_kafka_queue_destroy);
  const std::unique_ptr<rd_kafka_AdminOptions_t, decltype(&rd_kafka_AdminOptions_destroy)> options(
      rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_DESCRIBECONFIGS), &rd_kafka_AdminOptions_destroy);
  char err[256];
  rd_kafka_AdminOptions_set_request_timeout(options.get(), static_cast<int>(timeout.count()), err, sizeof err);
  rd_kafka_ConfigResource_t* resources[] = {resource.get()};
  rd_kafka_DescribeConfigs(rk, resources, 1, options.get(), queue.get());
  const std::unique_ptr<rd_kafka_event_t, decltype(&rd_kafka_event_destroy)> event(
      rd_kafka_queue_poll(queue.get(), static_cast<int>(timeout.count()) + 1000), &rd_kafka_event_destroy);
  DescribedConfig described;
  if (!event) {
    described.error = RD_KAFKA_RESP_ERR__TIMED_OUT;
    return described;
  }
  described.error = rd_kafka_event_error(event.get());
  if (!described.ok()) return described;
  const auto* result = rd_kafka_event_DescribeConfigs_result(event.get());
  if (result == nullptr) {
    described.error = RD_KAFKA_RESP_ERR__BAD_MSG;
    return described;
  }
  std::size_t count = 0;
  const auto** resources_described = rd_kafka_DescribeConfigs_result_resources(result, &count);
  for (std::size_t i = 0; i < count; ++i) {
    if (const auto error = rd_kafka_ConfigResource_error(resources_described[i]); error != RD_KAFKA_RESP_ERR_NO_ERROR) {
      described.error = error;
      return described;
    }
    std::size_t entries = 0;
    const auto** configs = rd_kafka_ConfigResource_configs(resources_described[i], &entries);
    for (std::size_t e = 0; e < entries; ++e) {
      const char* value = rd_kafka_ConfigEntry_value(configs[e]);
      described.entries[rd_kafka_ConfigEntry_name(configs[e])] = value != nullptr ? value : "";
    }
  }
  return described;
}

}  // namespace pgoutbox::kafka
