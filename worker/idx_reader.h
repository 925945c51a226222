// IDX reader: loads one gzip-compressed IDX file (the MNIST / Fashion-MNIST container).
//
// IDX layout (all integers big-endian), after gunzip:
//   bytes 0-1  zero
//   byte  2    element type (0x08 unsigned byte, 0x09 signed byte, 0x0B int16, 0x0C int32,
//              0x0D float32, 0x0E float64); only 0x08 is supported
//   byte  3    number of dimensions n (>= 1)
//   n x uint32 dimension sizes, outermost first
//   data       dims[0] * ... * dims[n-1] elements, row-major
//
// The whole file is read and checked: it must be gzip, must decompress cleanly (CRC included),
// and must hold exactly the declared amount of data, neither less nor more. Data larger than
// kMaxIdxDataBytes is refused before anything is allocated, so a corrupt or hostile header
// cannot make the reader allocate without bound.
//
// Errors name the file and the problem:
//   NOT_FOUND          the file does not exist
//   INVALID_ARGUMENT   the path is not a regular file
//   DATA_LOSS          not gzip, corrupt or truncated gzip, bad magic, unknown element type,
//                      zero or oversized dimensions, truncated data, trailing bytes
//   UNIMPLEMENTED      a valid IDX element type other than unsigned byte
//   other codes        from the operating system when opening or reading fails
//
// Thread safety: ReadIdxFile has no shared state and may run concurrently.
//
// Example:
//   TAMP_ASSIGN_OR_RETURN(IdxArray labels, ReadIdxFile(dir + "/train-labels-idx1-ubyte.gz"));
//   // labels.dims == {60000}, labels.data.size() == 60000
#ifndef TAMP_WORKER_IDX_READER_H_
#define TAMP_WORKER_IDX_READER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tamp {

// Largest data section ReadIdxFile accepts, in bytes (2 GiB).
inline constexpr uint64_t kMaxIdxDataBytes = uint64_t{1} << 31;

// One IDX tensor of unsigned bytes.
struct IdxArray {
  std::vector<uint32_t> dims;  // Outermost first; every entry >= 1.
  std::vector<uint8_t> data;   // Row-major; size() == product of dims.
};

// ReadIdxFile()
//
// Reads and validates the gzip-compressed IDX file at `path`. See the file comment for the
// format and the error codes.
absl::StatusOr<IdxArray> ReadIdxFile(const std::string& path);

}  // namespace tamp

#endif  // TAMP_WORKER_IDX_READER_H_
