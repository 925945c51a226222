// The Philox keys that make a codec's randomness reproducible on both sides of the wire: a
// worker encodes its push with the push key and the shard decodes it with the same one; the
// shard encodes its answer with the pull key and every worker decodes it with that key.
//
// Example:
//   codec.Encode(gradient, PushKey(config, step, chunk_id, worker_rank), &payload);
#ifndef TAMP_PROTOCOL_KEYS_H_
#define TAMP_PROTOCOL_KEYS_H_

#include <cstdint>

#include "base/philox.h"
#include "proto/config.pb.h"

namespace tamp {

// The push key of (step, chunk) is private to the worker; the pull key is shared, since every
// worker decodes the same update payload. Both are seeded by compression.seed.
RandomKey PushKey(const config::RunConfig& config, uint64_t step, uint32_t chunk, uint32_t worker);
RandomKey PullKey(const config::RunConfig& config, uint64_t step, uint32_t chunk);

}  // namespace tamp

#endif  // TAMP_PROTOCOL_KEYS_H_
