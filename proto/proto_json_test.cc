#include "base/proto_json.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "proto/config.pb.h"
#include "proto/events.pb.h"

namespace tamp {
namespace {

TEST(ProtoToJsonTest, PrintsEveryFieldSnakeCaseWithIntegersAsNumbers) {
  events::RunSummary summary;
  summary.set_name("mlp");
  summary.set_steps(1404);
  summary.set_bytes_pushed(std::numeric_limits<uint64_t>::max());  // Exact, not rounded.
  summary.set_test_accuracy(0.8823);
  summary.set_final_loss(0.25f);
  summary.set_compression_ratio(59.8);
  const std::string json = ProtoToJson(summary);
  EXPECT_EQ(json.find('\n'), std::string::npos);
  EXPECT_NE(json.find(R"("name":"mlp")"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("steps":1404,)"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("bytes_pushed":18446744073709551615,)"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("bytes_pulled":0,)"), std::string::npos) << json;  // Zeros too.
  EXPECT_NE(json.find(R"("test_accuracy":0.8823,)"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("final_loss":0.25,)"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("compression_ratio":59.8,)"), std::string::npos) << json;
  EXPECT_EQ(json.find("Ms"), std::string::npos) << "a lowerCamelCase name: " << json;
}

TEST(ProtoToJsonTest, RepeatedEnumsAndNonFiniteNumbers) {
  events::WorkerEvent event;
  event.set_kind(events::WorkerEvent::STEP);
  event.add_step_shard_bytes_pushed(2560);
  event.add_step_shard_bytes_pushed(7);
  event.set_loss(std::numeric_limits<float>::quiet_NaN());
  event.set_step_ms(std::numeric_limits<double>::infinity());
  event.set_compute_ms(-std::numeric_limits<double>::infinity());
  event.set_encode_ms(0.1);  // Shortest round trip, not 0.10000000000000001.
  const std::string json = ProtoToJson(event);
  EXPECT_EQ(json.rfind(R"({"kind":"STEP","worker":0,"step":0,)", 0), 0u) << json;
  EXPECT_NE(json.find(R"("step_shard_bytes_pushed":[2560,7],"step_shard_bytes_pulled":[],)"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find(R"("loss":"NaN",)"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("step_ms":"Infinity",)"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("compute_ms":"-Infinity",)"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("encode_ms":0.1,)"), std::string::npos) << json;
}

TEST(ProtoToJsonTest, NestedMessagesStringsAndUnsetOptionals) {
  config::RunConfig run;
  run.set_name("a \"quoted\"\\name\n\x01");
  run.mutable_cluster()->add_server_addresses("h:1");
  run.mutable_cluster()->set_plaintext(true);
  const std::string json = ProtoToJson(run);
  EXPECT_NE(json.find(R"("name":"a \"quoted\"\\name\n\u0001")"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("server_addresses":["h:1"])"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("plaintext":true)"), std::string::npos) << json;
  // Fields with presence print only when set: unset, they are absent, not zero.
  EXPECT_EQ(json.find(R"("model")"), std::string::npos) << json;
  EXPECT_EQ(json.find("eval_every_epoch"), std::string::npos) << json;
  run.mutable_training()->set_eval_every_epoch(false);
  EXPECT_NE(ProtoToJson(run).find(R"("eval_every_epoch":false)"), std::string::npos);
}

// What it writes, protobuf's JSON parser reads back to the same message.
TEST(ProtoToJsonTest, RoundTripsThroughProtobufsParser) {
  events::WorkerEvent event;
  event.set_kind(events::WorkerEvent::DONE);
  event.set_step(UINT64_C(1) << 60);
  event.set_loss(0.224458113f);
  event.set_test_accuracy(1.0 / 3.0);
  event.set_comm_hidden_percent(std::numeric_limits<double>::quiet_NaN());
  event.add_step_shard_bytes_pulled(9000);
  events::WorkerEvent parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(ProtoToJson(event), &parsed).ok());
  EXPECT_TRUE(std::isnan(parsed.comm_hidden_percent()));
  parsed.clear_comm_hidden_percent();
  event.clear_comm_hidden_percent();
  EXPECT_EQ(parsed.SerializeAsString(), event.SerializeAsString());

  config::RunConfig run;
  run.set_name("x");
  run.mutable_cluster()->set_num_workers(3);
  run.mutable_training()->set_eval_every_epoch(true);
  config::RunConfig run_parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(ProtoToJson(run), &run_parsed).ok());
  EXPECT_EQ(run_parsed.SerializeAsString(), run.SerializeAsString());
}

}  // namespace
}  // namespace tamp
