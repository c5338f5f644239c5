#pragma once
// Training data by global sequence index, so what a rank reads depends only
// on which sequences it is given, never on the grid: byte-level tokens from
// any file, or synthetic tokens.
#include <cstdint>
#include <string>
#include <vector>

namespace ff::engine {

class TokenSource {
 public:
  // "synthetic" or a path; throws InputError (missing, unreadable, too short
  // for one sequence, or bytes that do not fit the vocabulary).
  TokenSource(const std::string& spec, int vocab, int seq_len, uint64_t seed);
  // Sequence `index`: S + 1 tokens (inputs, then the last target).
  void sequence(long index, int* out) const;
  const std::string& description() const { return description_; }

 private:
  std::vector<unsigned char> bytes_;
  int vocab_, seq_len_;
  uint64_t seed_;
  std::string description_;
};

}  // namespace ff::engine
