#include "compress/ratio_warmup.h"

#include <map>

#include "absl/memory/memory.h"
#include "base/status_macros.h"
#include "compress/registry.h"

namespace tamp::compress {

config::Codec WarmupSpec(const config::Codec& spec, uint64_t epoch) {
  config::Codec out = spec;
  out.clear_ratio_warmup();
  if (epoch < static_cast<uint64_t>(spec.ratio_warmup_size())) {
    out.clear_count();
    out.set_ratio(spec.ratio_warmup(static_cast<int>(epoch)));
  }
  return out;
}

absl::StatusOr<std::unique_ptr<RatioWarmup>> RatioWarmup::Create(const config::Codec& spec,
                                                                  const ChunkShape& shape) {
  if (spec.ratio_warmup_size() == 0) return std::unique_ptr<RatioWarmup>();
  auto warmup = absl::WrapUnique(new RatioWarmup());
  std::map<double, Codec*> by_ratio;
  for (int e = 0; e < spec.ratio_warmup_size(); ++e) {
    Codec*& codec = by_ratio[spec.ratio_warmup(e)];
    if (codec == nullptr) {
      TAMP_ASSIGN_OR_RETURN(std::unique_ptr<Codec> created,
                            CreateCodec(WarmupSpec(spec, static_cast<uint64_t>(e)), shape));
      codec = created.get();
      warmup->codecs_.push_back(std::move(created));
    }
    warmup->by_epoch_.push_back(codec);
  }
  return warmup;
}

Codec& RatioWarmup::CodecFor(uint64_t epoch, Codec& configured) {
  return epoch < by_epoch_.size() ? *by_epoch_[epoch] : configured;
}

}  // namespace tamp::compress
