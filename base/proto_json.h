// One JSON style for every file Tamp writes from a proto message (worker events, the run
// summary, the metrics file): one line, field names exactly as in the .proto (snake_case), in
// declaration order, every field printed (zeros and empty lists too) but for fields with
// presence (sub-messages, proto3 `optional`, oneof members), which print when set; integers of
// any width as JSON numbers, enums by name, nested messages as objects, bytes as base64.
//
// Why not protobuf's JSON printer: proto3 JSON prints 64-bit integers as strings ("1404"),
// which every reader then has to convert, and it names fields in lowerCamelCase unless told.
//
// Floating-point fields print the shortest text that reads back to the same value (0.8823,
// 59.8, 12); non-finite ones as proto3 JSON's strings "NaN", "Infinity", "-Infinity", as JSON
// has no such numbers. protobuf's JSON parser (JsonStringToMessage) reads the output back to
// the same message.
#ifndef TAMP_BASE_PROTO_JSON_H_
#define TAMP_BASE_PROTO_JSON_H_

#include <string>

#include "google/protobuf/message.h"

namespace tamp {

// `message` as one line of JSON (no newline), as described above.
std::string ProtoToJson(const google::protobuf::Message& message);

}  // namespace tamp

#endif  // TAMP_BASE_PROTO_JSON_H_
