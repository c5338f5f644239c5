#include "advisor/model/memory_json.hpp"

namespace ff {

nlohmann::json memory_json(const MemoryUse& u) {
  return {{"states", u.states},           {"gathered", u.gathered}, {"grad_buffers", u.grad_buffers},
          {"activations", u.activations}, {"logits", u.logits},     {"reserve", u.reserve},
          {"offload_buckets", u.buckets}, {"host", u.host}};
}

}  // namespace ff
