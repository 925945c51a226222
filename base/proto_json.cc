#include "base/proto_json.h"

#include <charconv>
#include <cmath>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "glog/logging.h"
#include "google/protobuf/descriptor.h"

namespace tamp {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

void AppendString(const std::string& value, std::string* out) {
  out->push_back('"');
  for (const char c : value) {
    switch (c) {
      case '"': out->append("\\\""); break;
      case '\\': out->append("\\\\"); break;
      case '\n': out->append("\\n"); break;
      case '\r': out->append("\\r"); break;
      case '\t': out->append("\\t"); break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppendFormat(out, "\\u%04x", static_cast<unsigned char>(c));
        } else {
          out->push_back(c);  // UTF-8 passes through: proto3 strings are UTF-8.
        }
    }
  }
  out->push_back('"');
}

// Shortest text that reads back to `value` (float or double).
template <typename T>
void AppendFloat(T value, std::string* out) {
  if (std::isnan(value)) {
    out->append("\"NaN\"");
  } else if (std::isinf(value)) {
    out->append(value > 0 ? "\"Infinity\"" : "\"-Infinity\"");
  } else {
    char buffer[64];
    const std::to_chars_result result = std::to_chars(buffer, buffer + sizeof(buffer), value);
    CHECK(result.ec == std::errc()) << "64 characters hold any float or double";
    out->append(buffer, result.ptr);
  }
}

void AppendMessage(const Message& message, std::string* out);

// Element `index` of repeated field `field`, or the singular field when `index` is -1.
void AppendValue(const Message& message, const FieldDescriptor* field, int index,
                 std::string* out) {
  const Reflection* r = message.GetReflection();
  const bool rep = index >= 0;
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      absl::StrAppend(out, rep ? r->GetRepeatedInt32(message, field, index)
                               : r->GetInt32(message, field));
      break;
    case FieldDescriptor::CPPTYPE_INT64:
      absl::StrAppend(out, rep ? r->GetRepeatedInt64(message, field, index)
                               : r->GetInt64(message, field));
      break;
    case FieldDescriptor::CPPTYPE_UINT32:
      absl::StrAppend(out, rep ? r->GetRepeatedUInt32(message, field, index)
                               : r->GetUInt32(message, field));
      break;
    case FieldDescriptor::CPPTYPE_UINT64:
      absl::StrAppend(out, rep ? r->GetRepeatedUInt64(message, field, index)
                               : r->GetUInt64(message, field));
      break;
    case FieldDescriptor::CPPTYPE_FLOAT:
      AppendFloat(rep ? r->GetRepeatedFloat(message, field, index) : r->GetFloat(message, field),
                  out);
      break;
    case FieldDescriptor::CPPTYPE_DOUBLE:
      AppendFloat(rep ? r->GetRepeatedDouble(message, field, index)
                      : r->GetDouble(message, field),
                  out);
      break;
    case FieldDescriptor::CPPTYPE_BOOL:
      out->append((rep ? r->GetRepeatedBool(message, field, index) : r->GetBool(message, field))
                      ? "true"
                      : "false");
      break;
    case FieldDescriptor::CPPTYPE_ENUM: {
      const int number = rep ? r->GetRepeatedEnumValue(message, field, index)
                             : r->GetEnumValue(message, field);
      const auto* value = field->enum_type()->FindValueByNumber(number);
      // An open enum may hold a number without a name: print the number, as proto3 JSON does.
      if (value == nullptr) {
        absl::StrAppend(out, number);
      } else {
        AppendString(value->name(), out);
      }
      break;
    }
    case FieldDescriptor::CPPTYPE_STRING: {
      const std::string value = rep ? r->GetRepeatedString(message, field, index)
                                    : r->GetString(message, field);
      AppendString(field->type() == FieldDescriptor::TYPE_BYTES ? absl::Base64Escape(value)
                                                                : value,
                   out);
      break;
    }
    case FieldDescriptor::CPPTYPE_MESSAGE:
      AppendMessage(rep ? r->GetRepeatedMessage(message, field, index)
                        : r->GetMessage(message, field),
                    out);
      break;
  }
}

void AppendMessage(const Message& message, std::string* out) {
  const google::protobuf::Descriptor* descriptor = message.GetDescriptor();
  const Reflection* r = message.GetReflection();
  out->push_back('{');
  bool first = true;
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const FieldDescriptor* field = descriptor->field(i);
    // The files this writes have no maps; a message with one is a caller's mistake.
    CHECK(!field->is_map()) << "ProtoToJson does not print map fields: " << field->full_name();
    // Fields with presence (sub-messages, `optional`, oneof members) print only when set, so
    // that the output parses back to the same message.
    if (field->has_presence() && !r->HasField(message, field)) continue;
    if (!first) out->push_back(',');
    first = false;
    AppendString(field->name(), out);
    out->push_back(':');
    if (field->is_repeated()) {
      out->push_back('[');
      const int size = r->FieldSize(message, field);
      for (int j = 0; j < size; ++j) {
        if (j > 0) out->push_back(',');
        AppendValue(message, field, j, out);
      }
      out->push_back(']');
    } else {
      AppendValue(message, field, -1, out);
    }
  }
  out->push_back('}');
}

}  // namespace

std::string ProtoToJson(const Message& message) {
  std::string json;
  AppendMessage(message, &json);
  return json;
}

}  // namespace tamp
