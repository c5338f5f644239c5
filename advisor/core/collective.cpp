#include "advisor/core/collective.hpp"

#include <algorithm>

namespace ff {

const char* coll_name(Coll c) {
  switch (c) {
    case Coll::AllReduce: return "all-reduce";
    case Coll::AllGather: return "all-gather";
    case Coll::ReduceScatter: return "reduce-scatter";
  }
  return "";
}

std::vector<double> padded_times(std::vector<double> t) {
  for (size_t i = t.size(); i-- > 1;) t[i - 1] = std::min(t[i - 1], t[i]);
  return t;
}

}  // namespace ff
