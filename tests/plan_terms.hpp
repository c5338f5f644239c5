#pragma once
// Looking up a plan's terms by layer and description, for the tests that
// price them by hand; nullptr where there is none.
#include <cstring>

#include "advisor/model/cost_model.hpp"

namespace fftest {

inline const ff::CommTerm* comm_term(const ff::Plan& plan, const char* layer, const char* what) {
  for (const auto& c : plan.comm)
    if (std::strcmp(c.layer, layer) == 0 && std::strcmp(c.what, what) == 0) return &c;
  return nullptr;
}

inline const ff::CommTerm* comm_term(const ff::Plan& plan, const char* layer, const char* what, ff::Axis a) {
  for (const auto& c : plan.comm)
    if (std::strcmp(c.layer, layer) == 0 && std::strcmp(c.what, what) == 0 && c.axis == a) return &c;
  return nullptr;
}

inline const ff::ComputeTerm* compute_term(const ff::Plan& plan, const char* layer, const char* what) {
  for (const auto& c : plan.compute)
    if (std::strcmp(c.layer, layer) == 0 && std::strcmp(c.what, what) == 0) return &c;
  return nullptr;
}

}  // namespace fftest
