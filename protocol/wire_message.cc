#include "protocol/wire_message.h"

#include <utility>

#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/wire_format_lite.h"
#include "grpc/slice.h"

namespace tamp {

grpc::Slice SharedSlice(std::shared_ptr<const std::string> bytes) {
  auto* holder = new std::shared_ptr<const std::string>(std::move(bytes));
  const grpc_slice slice = grpc_slice_new_with_user_data(
      const_cast<char*>((*holder)->data()), (*holder)->size(),
      [](void* user_data) { delete static_cast<std::shared_ptr<const std::string>*>(user_data); },
      holder);
  return grpc::Slice(slice, grpc::Slice::STEAL_REF);
}

grpc::ByteBuffer WithBytesField(const google::protobuf::MessageLite& fields, int field_number,
                                grpc::Slice bytes) {
  std::string head = fields.SerializeAsString();
  if (bytes.size() == 0) {
    grpc::Slice only(head);
    return grpc::ByteBuffer(&only, 1);
  }
  {
    google::protobuf::io::StringOutputStream stream(&head);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.WriteTag(google::protobuf::internal::WireFormatLite::MakeTag(
        field_number, google::protobuf::internal::WireFormatLite::WIRETYPE_LENGTH_DELIMITED));
    coded.WriteVarint64(bytes.size());
  }
  grpc::Slice slices[] = {grpc::Slice(head), std::move(bytes)};
  return grpc::ByteBuffer(slices, 2);
}

}  // namespace tamp
