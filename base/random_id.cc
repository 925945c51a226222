#include "base/random_id.h"

#include <random>

namespace tamp {

uint64_t RandomNonZeroId() {
  std::random_device device;
  uint64_t id = 0;
  while (id == 0) id = (uint64_t{device()} << 32) | device();
  return id;
}

}  // namespace tamp
