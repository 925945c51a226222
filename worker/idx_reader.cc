#include "worker/idx_reader.h"

#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "base/status_macros.h"

namespace tamp {
namespace {

constexpr uint8_t kUnsignedByte = 0x08;

constexpr unsigned kGzBufferBytes = 1 << 17;
// Largest single read. gzread takes an unsigned length and returns an int.
constexpr size_t kDataPieceBytes = size_t{1} << 24;

absl::Status DataLoss(const std::string& path, absl::string_view problem) {
  return absl::DataLossError(absl::StrCat(path, ": ", problem));
}

// Name of a valid IDX element type other than unsigned byte, or nullptr for an invalid code.
const char* OtherIdxTypeName(uint8_t type) {
  switch (type) {
    case 0x09: return "signed byte";
    case 0x0B: return "int16";
    case 0x0C: return "int32";
    case 0x0D: return "float32";
    case 0x0E: return "float64";
    default: return nullptr;
  }
}

uint32_t LoadBigEndian32(const uint8_t* p) {
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | uint32_t{p[3]};
}

struct GzCloser {
  void operator()(gzFile file) const { gzclose(file); }
};

// The decompressed bytes of one gzip file, read front to back. Every zlib failure becomes a
// status that names the file.
class GzSource {
 public:
  static absl::StatusOr<GzSource> Open(const std::string& path) {
    struct stat info;
    if (stat(path.c_str(), &info) != 0) {
      return absl::ErrnoToStatus(errno, absl::StrCat(path, ": cannot open"));
    }
    if (!S_ISREG(info.st_mode)) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
    }
    errno = 0;
    gzFile file = gzopen(path.c_str(), "rbe");
    if (file == nullptr) {
      if (errno != 0) return absl::ErrnoToStatus(errno, absl::StrCat(path, ": cannot open"));
      return absl::ResourceExhaustedError(absl::StrCat(path, ": out of memory opening gzip"));
    }
    GzSource source(path, file);
    // gzbuffer must precede the first read; gzdirect performs it, looking for the gzip magic.
    gzbuffer(file, kGzBufferBytes);
    if (gzdirect(file)) {
      if (info.st_size == 0) return DataLoss(path, "file is empty, expected gzip data");
      return DataLoss(path, "not a gzip file (no gzip magic 1f 8b at the start)");
    }
    return source;
  }

  // Reads up to `len` (at most kDataPieceBytes) bytes into `out`; fewer only where the data
  // ends. A gzip stream that stops before its trailer (a cut-short file) is not an error
  // here: the short count shows it and ended_early() says why.
  absl::StatusOr<size_t> Read(uint8_t* out, size_t len) {
    const int got = gzread(file_.get(), out, static_cast<unsigned>(len));
    if (got < 0) return ReadError();
    return static_cast<size_t>(got);
  }

  // Reads exactly `len` bytes of `what` (named in the error when the file is shorter).
  absl::Status ReadExactly(uint8_t* out, size_t len, absl::string_view what) {
    TAMP_ASSIGN_OR_RETURN(const size_t got, Read(out, len));
    if (got == len) return absl::OkStatus();
    return DataLoss(path_, absl::StrCat("truncated: expected ", len, " bytes of ", what,
                                        ", file has ", got, ended_early_note()));
  }

  // Whether the gzip stream ended without its trailer (zlib's "unexpected end of file").
  bool ended_early() const {
    int errnum = Z_OK;
    gzerror(file_.get(), &errnum);
    return errnum == Z_BUF_ERROR;
  }
  // Explains a short read: " (the gzip stream is cut short)" where it is, else "".
  const char* ended_early_note() const {
    return ended_early() ? " (the gzip stream is cut short)" : "";
  }

 private:
  GzSource(std::string path, gzFile file) : path_(std::move(path)), file_(file) {}

  absl::Status ReadError() const {
    const int saved_errno = errno;
    int errnum = Z_OK;
    const char* message = gzerror(file_.get(), &errnum);
    if (errnum == Z_ERRNO) {
      return absl::ErrnoToStatus(saved_errno, absl::StrCat(path_, ": read failed"));
    }
    if (errnum == Z_MEM_ERROR) {
      return absl::ResourceExhaustedError(absl::StrCat(path_, ": out of memory in zlib"));
    }
    // zlib prefixes its messages with the path it was opened with.
    return DataLoss(path_, absl::StrCat("corrupt gzip data: ",
                                        absl::StripPrefix(message, path_ + ": ")));
  }

  std::string path_;
  std::unique_ptr<gzFile_s, GzCloser> file_;
};

}  // namespace

absl::StatusOr<IdxArray> ReadIdxFile(const std::string& path) {
  TAMP_ASSIGN_OR_RETURN(GzSource source, GzSource::Open(path));

  // Magic: two zero bytes, the element type, the number of dimensions.
  uint8_t magic[4];
  TAMP_RETURN_IF_ERROR(source.ReadExactly(magic, sizeof(magic), "IDX header"));
  if (magic[0] != 0 || magic[1] != 0) {
    return DataLoss(path, absl::StrFormat("bad IDX magic %02x %02x %02x %02x (the first two "
                                          "bytes must be zero): not an IDX file",
                                          magic[0], magic[1], magic[2], magic[3]));
  }
  const uint8_t type = magic[2];
  if (type != kUnsignedByte) {
    if (const char* name = OtherIdxTypeName(type)) {
      return absl::UnimplementedError(absl::StrFormat(
          "%s: IDX element type 0x%02x (%s) is not supported, only 0x08 (unsigned byte)", path,
          type, name));
    }
    return DataLoss(path, absl::StrFormat("unknown IDX element type 0x%02x", type));
  }
  const int ndims = magic[3];
  if (ndims == 0) return DataLoss(path, "IDX header declares zero dimensions");

  // Dimensions: ndims big-endian uint32, outermost first.
  uint8_t dim_bytes[4 * 255];
  TAMP_RETURN_IF_ERROR(source.ReadExactly(dim_bytes, 4 * ndims, "IDX dimensions"));
  IdxArray array;
  array.dims.resize(ndims);
  for (int i = 0; i < ndims; ++i) array.dims[i] = LoadBigEndian32(dim_bytes + 4 * i);
  // Each partial product stays <= 2^31 before one more uint32 factor, so none overflows.
  uint64_t bytes = 1;
  for (int i = 0; i < ndims; ++i) {
    if (array.dims[i] == 0) {
      return DataLoss(path, absl::StrCat("dimension ", i, " of ", absl::StrJoin(array.dims, "x"),
                                         " is zero"));
    }
    bytes *= array.dims[i];
    if (bytes > kMaxIdxDataBytes) {
      return DataLoss(path, absl::StrCat("dimensions ", absl::StrJoin(array.dims, "x"),
                                         " declare more than the ", kMaxIdxDataBytes,
                                         "-byte limit of data"));
    }
  }

  // Data, grown piece by piece as it arrives: reserve() only maps the memory, so a short
  // file with a large header touches no more memory than it holds.
  array.data.reserve(bytes);
  while (array.data.size() < bytes) {
    const size_t have = array.data.size();
    const size_t want = std::min<size_t>(bytes - have, kDataPieceBytes);
    array.data.resize(have + want);
    TAMP_ASSIGN_OR_RETURN(const size_t got, source.Read(array.data.data() + have, want));
    if (got < want) {
      return DataLoss(path, absl::StrCat("truncated: expected ", bytes, " bytes of data, file has ",
                                         have + got, source.ended_early_note()));
    }
  }

  // Reading on to the end also makes zlib check the gzip trailer (CRC-32 and length).
  uint8_t extra[4096];
  TAMP_ASSIGN_OR_RETURN(const size_t extra_bytes, source.Read(extra, sizeof(extra)));
  if (extra_bytes > 0) {
    return DataLoss(path, absl::StrCat("trailing garbage: ",
                                       extra_bytes == sizeof(extra) ? "at least " : "",
                                       extra_bytes, " bytes after the ", bytes,
                                       " bytes of data that the header declares"));
  }
  if (source.ended_early()) {
    return DataLoss(path, "gzip stream is cut short after the data (missing gzip trailer)");
  }
  return array;
}

}  // namespace tamp
