// A tamp.rpc message as gRPC bytes, its one large bytes field (a push's or an answer's
// payload) by reference instead of copied by protobuf's serializer: the other fields
// serialized, then that field's tag and length, then its bytes as a slice of their own.
// protobuf reads a message's fields in any order, so the receiver parses the result as the
// message itself (grpc::SerializationTraits, or the generated stub or service).
//
// Thread safety: free functions. The slices keep what they reference alive (SharedSlice).
//
// Example (server/service.cc, worker/ps_client.cc):
//   rpc::PushPullResponse fields;  // Every field but the payload.
//   fields.set_step(step);
//   grpc::ByteBuffer wire = WithBytesField(fields, rpc::PushPullResponse::kPayloadFieldNumber,
//                                          SharedSlice(update));
#ifndef TAMP_PROTOCOL_WIRE_MESSAGE_H_
#define TAMP_PROTOCOL_WIRE_MESSAGE_H_

#include <memory>
#include <string>

#include "google/protobuf/message_lite.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"

namespace tamp {

// A slice over `*bytes` that holds `bytes` until gRPC lets go of the slice.
grpc::Slice SharedSlice(std::shared_ptr<const std::string> bytes);

// `fields` serialized, followed by length-delimited field `field_number` holding `bytes`
// (left out when empty, as proto3 leaves out an empty bytes field). `fields` must not set
// that field itself.
grpc::ByteBuffer WithBytesField(const google::protobuf::MessageLite& fields, int field_number,
                                grpc::Slice bytes);

}  // namespace tamp

#endif  // TAMP_PROTOCOL_WIRE_MESSAGE_H_
