// How the relay acts on librdkafka's answers (kafka/producer.h): a record's delivery error, a
// transactional call's error and a producer's fatal error. The simulator feeds these the codes
// and flags librdkafka gives (tests/sim), so this table is what every schedule runs through.

#include <gtest/gtest.h>

#include "pgoutbox/kafka/producer.h"

namespace pgoutbox::kafka {
namespace {

TEST(ErrorMapping, DeliveryErrors) {
  struct Case {
    rd_kafka_resp_err_t code;
    DeliveryFailure kind;
  };
  for (const auto& c : {
           Case{RD_KAFKA_RESP_ERR__FATAL, DeliveryFailure::fatal},
           Case{RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER, DeliveryFailure::fatal},
           Case{RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH, DeliveryFailure::fatal},
           Case{RD_KAFKA_RESP_ERR_PRODUCER_FENCED, DeliveryFailure::fenced},
           Case{RD_KAFKA_RESP_ERR__FENCED, DeliveryFailure::fenced},
           Case{RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE, DeliveryFailure::permanent},
           Case{RD_KAFKA_RESP_ERR_POLICY_VIOLATION, DeliveryFailure::permanent},
           Case{RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED, DeliveryFailure::permanent},
           // Everything else is sent again, never given up on: timeouts, leaders, purges, states.
           Case{RD_KAFKA_RESP_ERR__STATE, DeliveryFailure::retriable},
           Case{RD_KAFKA_RESP_ERR__PURGE_QUEUE, DeliveryFailure::retriable},
           Case{RD_KAFKA_RESP_ERR__TIMED_OUT, DeliveryFailure::retriable},
           Case{RD_KAFKA_RESP_ERR__MSG_TIMED_OUT, DeliveryFailure::retriable},
           Case{RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION, DeliveryFailure::retriable},
           Case{RD_KAFKA_RESP_ERR_CONCURRENT_TRANSACTIONS, DeliveryFailure::retriable},
           Case{RD_KAFKA_RESP_ERR__QUEUE_FULL, DeliveryFailure::retriable},
       }) {
    const auto e = delivery_error(c.code);
    EXPECT_EQ(e.kind, c.kind) << e.code;
    EXPECT_EQ(e.code, rd_kafka_err2name(c.code));
    EXPECT_EQ(e.size_refusal, c.code == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE) << e.code;
  }
}

TEST(ErrorMapping, TransactionalCalls) {
  struct Case {
    TxnError error;
    TxnStatus status;
  };
  for (const auto& c : {
           Case{{}, TxnStatus::ok},
           Case{{RD_KAFKA_RESP_ERR__TIMED_OUT, false, true, false, "t"}, TxnStatus::retry},
           Case{{RD_KAFKA_RESP_ERR__CONFLICT, false, true, false, "t"}, TxnStatus::retry},
           // Retriable but requiring an abort is an abort.
           Case{{RD_KAFKA_RESP_ERR_CONCURRENT_TRANSACTIONS, false, true, true, "t"}, TxnStatus::abort},
           Case{{RD_KAFKA_RESP_ERR_INVALID_TXN_STATE, false, false, true, "t"}, TxnStatus::abort},
           Case{{RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH, false, false, true, "t"}, TxnStatus::abort},
           // A call out of order: nothing of the transaction can be trusted.
           Case{{RD_KAFKA_RESP_ERR__STATE, false, false, false, "t"}, TxnStatus::abort},
           Case{{RD_KAFKA_RESP_ERR__FENCED, true, false, false, "t"}, TxnStatus::fenced},
           Case{{RD_KAFKA_RESP_ERR_PRODUCER_FENCED, true, false, false, "t"}, TxnStatus::fenced},
           Case{{RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER, true, false, false, "t"}, TxnStatus::fatal},
       }) {
    const auto r = txn_result(c.error);
    EXPECT_EQ(r.status, c.status) << rd_kafka_err2name(c.error.code);
    if (c.error.code != RD_KAFKA_RESP_ERR_NO_ERROR) {
      EXPECT_NE(r.message.find(rd_kafka_err2name(c.error.code)), std::string::npos) << r.message;
    }
  }
}

TEST(ErrorMapping, ProducerFatalErrors) {
  EXPECT_EQ(sink_fatal(RD_KAFKA_RESP_ERR__GAPLESS_GUARANTEE, "x").kind, SinkFatal::Kind::gap);
  EXPECT_EQ(sink_fatal(RD_KAFKA_RESP_ERR__FENCED, "x").kind, SinkFatal::Kind::fenced);
  EXPECT_EQ(sink_fatal(RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER, "x").kind, SinkFatal::Kind::idempotence);
  EXPECT_EQ(sink_fatal(RD_KAFKA_RESP_ERR__SSL, "x").kind, SinkFatal::Kind::other);
}

}  // namespace
}  // namespace pgoutbox::kafka
