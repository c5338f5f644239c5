#include "engine/data.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "advisor/core/error.hpp"
#include "engine/rng.hpp"

namespace ff::engine {

TokenSource::TokenSource(const std::string& spec, int vocab, int seq_len, uint64_t seed)
    : vocab_(vocab), seq_len_(seq_len), seed_(seed) {
  if (spec == "synthetic") {
    description_ = "synthetic";
    return;
  }
  std::ifstream in(spec, std::ios::binary);
  if (!in) input_error(spec + ": cannot read data file (" + std::strerror(errno) + ")");
  bytes_.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (bytes_.size() < size_t(seq_len) + 1)
    input_error(spec + ": " + std::to_string(bytes_.size()) + " bytes, fewer than one sequence of " +
                std::to_string(seq_len + 1) + " tokens");
  if (vocab < 256) {
    for (unsigned char b : bytes_)
      if (b >= vocab)
        input_error(spec + ": byte-level tokens need a vocabulary of 256; the model has " + std::to_string(vocab));
  }
  description_ = spec + " (" + std::to_string(bytes_.size()) + " bytes)";
}

void TokenSource::sequence(long index, int* out) const {
  const int n = seq_len_ + 1;
  if (bytes_.empty()) {
    for (int j = 0; j < n; ++j) out[j] = int(key_hash(seed_, 0x5e9, uint64_t(index), uint64_t(j)) % uint64_t(vocab_));
    return;
  }
  // A window at a position fixed by the index alone.
  uint64_t start = key_hash(seed_, 0xda7a, uint64_t(index), 0) % uint64_t(bytes_.size() - n + 1);
  for (int j = 0; j < n; ++j) out[j] = bytes_[start + j];
}

}  // namespace ff::engine
