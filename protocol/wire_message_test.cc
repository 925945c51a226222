#include "protocol/wire_message.h"

#include <memory>
#include <string>
#include <vector>

#include "grpcpp/impl/codegen/proto_utils.h"
#include "gtest/gtest.h"
#include "proto/tamp.pb.h"

namespace tamp {
namespace {

rpc::PushPullRequest Parse(grpc::ByteBuffer wire) {
  rpc::PushPullRequest parsed;
  const grpc::Status status =
      grpc::SerializationTraits<rpc::PushPullRequest>::Deserialize(&wire, &parsed);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return parsed;
}

rpc::PushPullRequest Fields() {
  rpc::PushPullRequest fields;
  fields.set_worker_rank(3);
  fields.set_step(1234567);
  fields.set_chunk_id(9);
  fields.set_round(1);
  fields.set_server_incarnation(42);
  return fields;
}

TEST(WithBytesFieldTest, ParsesAsTheMessageWithThePayloadByReference) {
  // Bytes of every value, longer than one varint byte of length.
  auto payload = std::make_shared<std::string>();
  for (int i = 0; i < 70000; ++i) payload->push_back(static_cast<char>(i * 7));
  const grpc::ByteBuffer wire = WithBytesField(
      Fields(), rpc::PushPullRequest::kPayloadFieldNumber, SharedSlice(payload));

  rpc::PushPullRequest expected = Fields();
  expected.set_payload(*payload);
  EXPECT_EQ(wire.Length(), expected.ByteSizeLong());
  const rpc::PushPullRequest parsed = Parse(wire);
  EXPECT_EQ(parsed.SerializeAsString(), expected.SerializeAsString());

  // The payload slice is the string's own memory, held by the buffer.
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(wire.Dump(&slices).ok());
  ASSERT_EQ(slices.size(), 2u);
  EXPECT_EQ(static_cast<const void*>(slices[1].begin()),
            static_cast<const void*>(payload->data()));
  EXPECT_GE(payload.use_count(), 2);
}

TEST(WithBytesFieldTest, AnEmptyPayloadIsLeftOutAsProto3Does) {
  const grpc::ByteBuffer wire =
      WithBytesField(Fields(), rpc::PushPullRequest::kPayloadFieldNumber, grpc::Slice());
  EXPECT_EQ(wire.Length(), Fields().ByteSizeLong());
  EXPECT_EQ(Parse(wire).SerializeAsString(), Fields().SerializeAsString());
}

TEST(SharedSliceTest, HoldsTheBytesUntilTheLastSliceGoes) {
  auto bytes = std::make_shared<const std::string>("payload");
  std::weak_ptr<const std::string> watch = bytes;
  {
    grpc::Slice slice = SharedSlice(std::move(bytes));
    grpc::Slice copy = slice;  // Another reference to the same slice.
    EXPECT_FALSE(watch.expired());
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(copy.begin()), copy.size()), "payload");
  }
  EXPECT_TRUE(watch.expired());
}

}  // namespace
}  // namespace tamp
