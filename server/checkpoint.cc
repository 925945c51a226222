#include "server/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/util/message_differencer.h"
#include "protocol/handshake.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "Tamp needs a little-endian host");

namespace tamp {
namespace {

constexpr char kMagic[8] = {'T', 'A', 'M', 'P', 'C', 'K', 'P', 'T'};
constexpr size_t kVersionOffset = 8;
constexpr size_t kFingerprintOffset = 12;
constexpr size_t kBodyLengthOffset = 20;
constexpr size_t kHeaderBytes = 28;
constexpr size_t kChecksumBytes = 4;
// How many lines of a job difference an error quotes.
constexpr int kReportedDifferences = 3;

std::string Deterministic(const google::protobuf::Message& message) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&coded);
  }
  return bytes;
}

uint64_t Fingerprint(const checkpoint::JobIdentity& job) {
  uint64_t hash = 14695981039346656037ull;  // FNV-1a 64.
  for (const unsigned char byte : Deterministic(job)) {
    hash = (hash ^ byte) * 1099511628211ull;
  }
  return hash;
}

uint32_t Crc32(absl::string_view bytes) {
  return static_cast<uint32_t>(
      crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(bytes.data()),
            static_cast<uInt>(bytes.size())));
}

template <typename T>
void Append(T value, std::string* out) {
  out->append(reinterpret_cast<const char*>(&value), sizeof(value));
}

template <typename T>
T Read(absl::string_view bytes, size_t offset) {
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(value));
  return value;
}

// A registered tensor as a message names it: "fc1.weight" [256, 784].
std::string TensorText(const rpc::TensorInfo& tensor) {
  return absl::StrCat("\"", tensor.name(), "\" [", absl::StrJoin(tensor.shape(), ", "), "]");
}

// The first registered tensor that differs (model.kind REGISTERED), as the user knows the
// model; empty when the tensors agree. Its chunks' ranges differ too, in field terms.
std::string FirstTensorDifference(const checkpoint::JobIdentity& written,
                                  const checkpoint::JobIdentity& expected) {
  const int common = std::min(written.tensors_size(), expected.tensors_size());
  for (int i = 0; i < common; ++i) {
    if (!google::protobuf::util::MessageDifferencer::Equals(written.tensors(i),
                                                             expected.tensors(i))) {
      return absl::StrCat("tensor ", i, ": ", TensorText(written.tensors(i)), " -> ",
                          TensorText(expected.tensors(i)));
    }
  }
  if (written.tensors_size() == expected.tensors_size()) return "";
  return absl::StrCat("tensors: ", written.tensors_size(), " -> ", expected.tensors_size());
}

// The first differences between the checkpoint's job and the server's, one per line.
std::string JobDifferences(const checkpoint::JobIdentity& written,
                           const checkpoint::JobIdentity& expected) {
  std::string report;
  google::protobuf::util::MessageDifferencer differencer;
  differencer.ReportDifferencesToString(&report);
  differencer.Compare(written, expected);
  std::vector<absl::string_view> lines = absl::StrSplit(report, '\n', absl::SkipEmpty());
  const std::string tensor = FirstTensorDifference(written, expected);
  if (!tensor.empty()) lines.insert(lines.begin(), tensor);
  if (lines.size() > kReportedDifferences) {
    const size_t more = lines.size() - kReportedDifferences;
    lines.resize(kReportedDifferences);
    return absl::StrCat(absl::StrJoin(lines, "; "), "; and ", more, " more");
  }
  return absl::StrJoin(lines, "; ");
}

absl::Status SystemError(absl::string_view what, const std::string& path) {
  return absl::UnavailableError(absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

absl::Status WriteAll(int fd, absl::string_view bytes, const std::string& path) {
  while (!bytes.empty()) {
    const ssize_t written = write(fd, bytes.data(), bytes.size());
    if (written < 0) {
      if (errno == EINTR) continue;
      return SystemError("cannot write", path);
    }
    bytes.remove_prefix(static_cast<size_t>(written));
  }
  return absl::OkStatus();
}

// Makes a rename in `dir` durable.
absl::Status SyncDirectory(const std::string& dir) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return SystemError("cannot open directory", dir);
  const bool synced = fsync(fd) == 0;
  const absl::Status status = synced ? absl::OkStatus() : SystemError("cannot fsync", dir);
  close(fd);
  return status;
}

}  // namespace

std::string CheckpointPath(absl::string_view dir, uint32_t rank) {
  return absl::StrCat(dir, "/shard-", rank, ".ckpt");
}

checkpoint::JobIdentity DescribeJob(const config::RunConfig& config, const JobLayout& layout,
                                    uint32_t rank) {
  checkpoint::JobIdentity job;
  job.set_shard_rank(rank);
  job.set_num_servers(config.cluster().num_servers());
  job.set_num_workers(config.cluster().num_workers());
  job.set_consistency_mode(config.consistency().mode());
  *job.mutable_optimizer() = config.optimizer();
  job.set_compression_seed(config.compression().seed());
  // The handshake's description of the chunks, so both compare the layout alike.
  rpc::HandshakeRequest handshake;
  FillHandshake(layout, config, /*worker_rank=*/0, rank, /*steps_per_epoch=*/0,
                /*total_steps=*/0, &handshake);
  *job.mutable_chunks() = handshake.chunks();
  if (config.model().kind() == config::Model::REGISTERED) {
    *job.mutable_tensors() = handshake.tensors();
  }
  return job;
}

std::string SerializeCheckpoint(const checkpoint::JobIdentity& job,
                                const checkpoint::ShardState& state) {
  checkpoint::CheckpointBody body;
  *body.mutable_job() = job;
  *body.mutable_state() = state;
  const std::string body_bytes = Deterministic(body);
  std::string out(kMagic, sizeof(kMagic));
  Append<uint32_t>(kCheckpointVersion, &out);
  Append<uint64_t>(Fingerprint(job), &out);
  Append<uint64_t>(body_bytes.size(), &out);
  out += body_bytes;
  Append<uint32_t>(Crc32(out), &out);
  return out;
}

namespace {

// The body of checkpoint `bytes`, if it is sound: ParseCheckpoint() without the job check.
absl::StatusOr<checkpoint::CheckpointBody> ParseSoundBody(absl::string_view bytes,
                                                          absl::string_view name) {
  auto damaged = [&](absl::string_view what) {
    return absl::DataLossError(absl::StrCat(name, ": damaged checkpoint, ", what));
  };
  if (bytes.size() < kHeaderBytes + kChecksumBytes) {
    return damaged(absl::StrCat("truncated: ", bytes.size(), " bytes, the header and checksum "
                                "alone take ", kHeaderBytes + kChecksumBytes));
  }
  if (std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    return damaged("not a Tamp checkpoint (bad magic)");
  }
  const uint64_t body_length = Read<uint64_t>(bytes, kBodyLengthOffset);
  const uint64_t body_room = bytes.size() - kHeaderBytes - kChecksumBytes;
  if (body_length != body_room) {
    return damaged(absl::StrCat(body_length > body_room ? "truncated" : "trailing bytes",
                                ": the header says ", body_length, " body bytes, the file has ",
                                body_room));
  }
  const size_t checked = kHeaderBytes + body_length;
  const uint32_t stored_crc = Read<uint32_t>(bytes, checked);
  if (const uint32_t crc = Crc32(bytes.substr(0, checked)); crc != stored_crc) {
    return damaged(absl::StrCat("CRC-32 mismatch (stored ", stored_crc, ", computed ", crc, ")"));
  }
  if (const uint32_t version = Read<uint32_t>(bytes, kVersionOffset);
      version < kOldestCheckpointVersion || version > kCheckpointVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        name, ": checkpoint format version ", version, ", this build reads versions ",
        kOldestCheckpointVersion, " to ", kCheckpointVersion));
  }
  checkpoint::CheckpointBody body;
  if (!body.ParseFromArray(bytes.data() + kHeaderBytes, static_cast<int>(body_length))) {
    return damaged("the body does not parse");
  }
  if (Read<uint64_t>(bytes, kFingerprintOffset) != Fingerprint(body.job())) {
    return damaged("the header's job fingerprint does not match the body's job");
  }
  return body;
}

// The content of the file at `path`; NOT_FOUND when there is none.
absl::StatusOr<std::string> ReadCheckpointFile(const std::string& path) {
  // An ifstream opens a directory and reads it as empty: "truncated" would misname it.
  if (std::error_code error; std::filesystem::is_directory(path, error)) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " is a directory, not a checkpoint file: move it away"));
  }
  std::ifstream file(path, std::ios::binary);
  if (!file.is_open()) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat("no checkpoint at ", path));
    return SystemError("cannot open", path);
  }
  std::ostringstream content;
  content << file.rdbuf();
  if (file.bad()) return SystemError("cannot read", path);
  return content.str();
}

}  // namespace

absl::StatusOr<checkpoint::ShardState> ParseCheckpoint(absl::string_view bytes,
                                                       absl::string_view name,
                                                       const checkpoint::JobIdentity& expected) {
  TAMP_ASSIGN_OR_RETURN(checkpoint::CheckpointBody body, ParseSoundBody(bytes, name));
  if (Fingerprint(body.job()) != Fingerprint(expected) ||
      !google::protobuf::util::MessageDifferencer::Equals(body.job(), expected)) {
    return absl::FailedPreconditionError(
        absl::StrCat(name, ": written for another job (checkpoint -> this server): ",
                     JobDifferences(body.job(), expected)));
  }
  return std::move(*body.mutable_state());
}

namespace {

// The directory of checkpoint `path`, created when missing.
absl::StatusOr<std::string> CreateCheckpointDir(const std::string& path) {
  const std::filesystem::path target(path);
  const std::string dir =
      target.has_parent_path() ? target.parent_path().string() : std::string(".");
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    return absl::UnavailableError(
        absl::StrCat("cannot create directory ", dir, ": ", error.message()));
  }
  return dir;
}

}  // namespace

absl::Status CheckCheckpointWritable(const std::string& path) {
  TAMP_RETURN_IF_ERROR(CreateCheckpointDir(path).status());
  const std::string probe = absl::StrCat(path, ".probe");
  const int fd = open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return SystemError("cannot create", probe);
  close(fd);
  unlink(probe.c_str());
  return absl::OkStatus();
}

absl::Status WriteCheckpoint(const std::string& path, const checkpoint::JobIdentity& job,
                             const checkpoint::ShardState& state) {
  TAMP_ASSIGN_OR_RETURN(const std::string dir, CreateCheckpointDir(path));
  const std::string tmp = absl::StrCat(path, ".tmp");
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return SystemError("cannot create", tmp);
  absl::Status status = WriteAll(fd, SerializeCheckpoint(job, state), tmp);
  if (status.ok() && fsync(fd) != 0) status = SystemError("cannot fsync", tmp);
  if (close(fd) != 0 && status.ok()) status = SystemError("cannot close", tmp);
  if (status.ok() && rename(tmp.c_str(), path.c_str()) != 0) {
    status = SystemError(absl::StrCat("cannot rename ", tmp, " to"), path);
  }
  if (!status.ok()) {
    unlink(tmp.c_str());
    return status;
  }
  return SyncDirectory(dir);
}

absl::StatusOr<checkpoint::ShardState> ReadCheckpoint(const std::string& path,
                                                      const checkpoint::JobIdentity& expected) {
  TAMP_ASSIGN_OR_RETURN(const std::string content, ReadCheckpointFile(path));
  return ParseCheckpoint(content, path, expected);
}

absl::Status CheckCheckpointSound(const std::string& path) {
  absl::StatusOr<std::string> content = ReadCheckpointFile(path);
  if (absl::IsNotFound(content.status())) return absl::OkStatus();
  TAMP_RETURN_IF_ERROR(content.status());
  return ParseSoundBody(*content, path).status();
}

}  // namespace tamp
