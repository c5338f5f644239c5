// Each layer's backward against central finite differences of its forward
// (fp64, one rank, small sizes), then the whole model's gradient of every
// tensor at a few elements.
#include <doctest/doctest.h>
#include <mpi.h>

#include <cmath>
#include <functional>
#include <vector>

#include "engine/flash_attention.hpp"
#include "engine/gpt.hpp"
#include "engine/layers.hpp"
#include "engine/llama_layers.hpp"
#include "engine/mpi_comm.hpp"
#include "engine/rng.hpp"

using namespace ff;
using namespace ff::engine;

namespace {

std::vector<double> randoms(size_t n, uint64_t key, double scale = 1.0) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * normal_at(99, key, i, 0);
  return v;
}

// Central difference of f with respect to x[i].
double numeric(const std::function<double()>& f, double& x, double h = 1e-6) {
  double keep = x;
  x = keep + h;
  double up = f();
  x = keep - h;
  double down = f();
  x = keep;
  return (up - down) / (2 * h);
}

void check_close(double analytic, double fd, const char* what, size_t i) {
  INFO(what << "[" << i << "] analytic " << analytic << " numeric " << fd);
  CHECK(std::abs(analytic - fd) <= 1e-6 * std::max(1.0, std::abs(fd)));
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

}  // namespace

// The layers' local steps on one rank, whose reductions are the identity.
TEST_CASE("layernorm backward matches finite differences") {
  const long t = 3, H = 8;
  auto x = randoms(t * H, 1), gamma = randoms(H, 2), beta = randoms(H, 3), w = randoms(t * H, 4);
  std::vector<double> y(t * H), xhat(t * H), rstd(t), sum(t), mean(t), sq(t), stat(2 * t);
  auto loss = [&] {
    layernorm_row_sums(x.data(), sum.data(), t, H);
    layernorm_centred_squares(x.data(), sum.data(), mean.data(), sq.data(), t, H, H);
    layernorm_normalize(x.data(), mean.data(), sq.data(), gamma.data(), beta.data(), y.data(), xhat.data(),
                        rstd.data(), t, H, H);
    return dot(y, w);
  };
  loss();
  std::vector<double> dx(t * H), dg(H, 0.0), db(H, 0.0);
  layernorm_backward_sums(w.data(), xhat.data(), gamma.data(), stat.data(), t, H);
  layernorm_backward_apply(w.data(), xhat.data(), rstd.data(), gamma.data(), stat.data(), dx.data(), dg.data(),
                           db.data(), t, H, H);
  for (size_t i = 0; i < x.size(); ++i) check_close(dx[i], numeric(loss, x[i]), "x", i);
  for (size_t i = 0; i < gamma.size(); ++i) check_close(dg[i], numeric(loss, gamma[i]), "gamma", i);
  for (size_t i = 0; i < beta.size(); ++i) check_close(db[i], numeric(loss, beta[i]), "beta", i);
}

TEST_CASE("gelu backward matches finite differences") {
  auto x = randoms(16, 5, 2.0), w = randoms(16, 6);
  std::vector<double> y(16), dx(16);
  auto loss = [&] {
    gelu_forward(x.data(), y.data(), 16);
    return dot(y, w);
  };
  gelu_backward(x.data(), w.data(), dx.data(), 16);
  for (size_t i = 0; i < x.size(); ++i) check_close(dx[i], numeric(loss, x[i]), "x", i);
  // GELU(0) = 0, GELU'(0) = 1/2, GELU(x) → x for large x.
  double z[3] = {0, 10, -10}, gz[3], one[3] = {1, 1, 1}, dz[3];
  gelu_forward(z, gz, 3);
  gelu_backward(z, one, dz, 3);
  CHECK(gz[0] == 0);
  CHECK(dz[0] == doctest::Approx(0.5));
  CHECK(gz[1] == doctest::Approx(10));
  CHECK(gz[2] == doctest::Approx(0).epsilon(1e-12));
}

TEST_CASE("causal attention backward matches finite differences, and the future is masked") {
  const long seqs = 2, S = 5, heads = 2, dh = 3, hy = heads * dh;
  auto qkv = randoms(seqs * S * 3 * hy, 7), w = randoms(seqs * S * hy, 8);
  std::vector<double> out(seqs * S * hy), probs(seqs * heads * S * S), dqkv(qkv.size());
  auto dev = make_cpu_device();
  auto loss = [&] {
    attention_forward<double>(*dev, qkv.data(), out.data(), probs.data(), seqs, S, heads, heads, dh);
    return dot(out, w);
  };
  loss();
  attention_backward<double>(*dev, qkv.data(), probs.data(), w.data(), dqkv.data(), seqs, S, heads, heads, dh);
  for (size_t i = 0; i < qkv.size(); ++i) check_close(dqkv[i], numeric(loss, qkv[i]), "qkv", i);
  // Token 0 attends only to itself: its output is its own V.
  for (long j = 0; j < dh; ++j) CHECK(out[j] == doctest::Approx(qkv[2 * hy + j]));
}

TEST_CASE("grouped-query attention: backward matches finite differences; each KV head serves its group") {
  // 4 query heads over 2 KV heads: heads 0, 1 read KV head 0; heads 2, 3 KV head 1.
  const long seqs = 2, S = 4, heads = 4, kv = 2, dh = 2, hy = heads * dh, ld = (heads + 2 * kv) * dh;
  auto qkv = randoms(seqs * S * ld, 21), w = randoms(seqs * S * hy, 22);
  std::vector<double> out(seqs * S * hy), probs(seqs * heads * S * S), dqkv(qkv.size());
  auto dev = make_cpu_device();
  auto loss = [&] {
    attention_forward<double>(*dev, qkv.data(), out.data(), probs.data(), seqs, S, heads, kv, dh);
    return dot(out, w);
  };
  loss();
  attention_backward<double>(*dev, qkv.data(), probs.data(), w.data(), dqkv.data(), seqs, S, heads, kv, dh);
  for (size_t i = 0; i < qkv.size(); ++i) check_close(dqkv[i], numeric(loss, qkv[i]), "qkv", i);
  // Token 0 attends only to itself: query head h's output is V of KV head h / 2,
  // which starts at column (heads + kv + h / 2)·dh.
  for (long h = 0; h < heads; ++h)
    for (long j = 0; j < dh; ++j) CHECK(out[h * dh + j] == doctest::Approx(qkv[(heads + kv + h / 2) * dh + j]));
}

// The blocked attention against the unfused one above (itself checked by
// finite differences): the same function computed another way. Sequences of
// one token, of a tile less one, a tile, a tile and one, and several tiles
// (the diagonal tile cut short), multi-head and groups of 2 and 3.
TEST_CASE("flash attention equals the unfused attention: output, and dQ, dK, dV (fp64 to 1e-12)") {
  struct Shape {
    long seqs, S, heads, kv, dh;
  };
  for (const Shape& sh : {Shape{2, 1, 2, 2, 4}, Shape{2, 63, 2, 1, 8}, Shape{1, 64, 3, 3, 4}, Shape{2, 65, 4, 2, 8},
                          Shape{1, 150, 6, 2, 16}, Shape{1, 130, 1, 1, 64}}) {
    const long seqs = sh.seqs, S = sh.S, heads = sh.heads, kv = sh.kv, dh = sh.dh, hy = heads * dh;
    INFO(seqs << " sequences of " << S << " tokens, " << heads << " heads over " << kv << " KV heads of " << dh);
    auto qkv = randoms(seqs * S * (heads + 2 * kv) * dh, 31), dout = randoms(seqs * S * hy, 32);
    auto dev = make_cpu_device();
    std::vector<double> out(seqs * S * hy), probs(seqs * heads * S * S), dqkv(qkv.size());
    attention_forward<double>(*dev, qkv.data(), out.data(), probs.data(), seqs, S, heads, kv, dh);
    attention_backward<double>(*dev, qkv.data(), probs.data(), dout.data(), dqkv.data(), seqs, S, heads, kv, dh);
    std::vector<double> fout(out.size(), 9.0), lse(seqs * heads * S, 9.0), fdqkv(qkv.size(), 9.0);
    flash_attention_forward<double>(*dev, qkv.data(), fout.data(), lse.data(), seqs, S, heads, kv, dh);
    flash_attention_backward<double>(*dev, qkv.data(), fout.data(), lse.data(), dout.data(), fdqkv.data(), seqs, S,
                                     heads, kv, dh);
    for (size_t i = 0; i < out.size(); ++i) REQUIRE(fout[i] == doctest::Approx(out[i]).epsilon(1e-12));
    for (size_t i = 0; i < qkv.size(); ++i) REQUIRE(fdqkv[i] == doctest::Approx(dqkv[i]).epsilon(1e-12));
    // lse by its definition, log Σ_{j ≤ i} exp(q_i·k_j / √dh), from the kept
    // probabilities: P_ij = exp(s_ij − lse_i), so lse_i = s_i0 − log P_i0.
    const long ld = (heads + 2 * kv) * dh;
    for (long q = 0; q < seqs; ++q)
      for (long h = 0; h < heads; ++h)
        for (long i = 0; i < S; ++i) {
          double s0 = 0;
          for (long d = 0; d < dh; ++d)
            s0 += qkv[(q * S + i) * ld + h * dh + d] * qkv[(q * S) * ld + (heads + h / (heads / kv)) * dh + d];
          s0 /= std::sqrt(double(dh));
          const double want = s0 - std::log(probs[((q * heads + h) * S + i) * S]);
          REQUIRE(lse[(q * heads + h) * S + i] == doctest::Approx(want).epsilon(1e-12));
        }
  }
}

TEST_CASE("rmsnorm backward matches finite differences; a constant row normalises to γ") {
  const long t = 3, H = 8;
  auto x = randoms(t * H, 23), gamma = randoms(H, 24), w = randoms(t * H, 25);
  std::vector<double> y(t * H), xhat(t * H), rstd(t), sq(t), stat(t);
  auto loss = [&] {
    rmsnorm_row_squares(x.data(), sq.data(), t, H);
    rmsnorm_normalize(x.data(), sq.data(), gamma.data(), y.data(), xhat.data(), rstd.data(), t, H, H);
    return dot(y, w);
  };
  loss();
  std::vector<double> dx(t * H), dg(H, 0.0);
  rmsnorm_backward_sums(w.data(), xhat.data(), gamma.data(), stat.data(), t, H);
  rmsnorm_backward_apply(w.data(), xhat.data(), rstd.data(), gamma.data(), stat.data(), dx.data(), dg.data(), t, H, H);
  for (size_t i = 0; i < x.size(); ++i) check_close(dx[i], numeric(loss, x[i]), "x", i);
  for (size_t i = 0; i < gamma.size(); ++i) check_close(dg[i], numeric(loss, gamma[i]), "gamma", i);
  // x = 3 everywhere: rms 3, so y = γ·3/√(9 + ε).
  std::vector<double> c(H, 3.0), yc(H), xc(H);
  double s1 = 0, r1 = 0;
  rmsnorm_row_squares(c.data(), &s1, 1, H);
  CHECK(s1 == doctest::Approx(9.0 * H));
  rmsnorm_normalize(c.data(), &s1, gamma.data(), yc.data(), xc.data(), &r1, 1, H, H);
  for (long j = 0; j < H; ++j) CHECK(yc[j] == doctest::Approx(gamma[j] * 3 / std::sqrt(9 + kLayerNormEps)));
}

TEST_CASE("swiglu backward matches finite differences; SiLU(0) = 0 and SiLU(x) → x") {
  const long t = 2, fy = 5;
  auto f = randoms(t * 2 * fy, 26, 2.0), w = randoms(t * fy, 27);
  std::vector<double> g(t * fy), df(f.size());
  auto loss = [&] {
    swiglu_forward(f.data(), g.data(), t, fy);
    return dot(g, w);
  };
  swiglu_backward(f.data(), w.data(), df.data(), t, fy);
  for (size_t i = 0; i < f.size(); ++i) check_close(df[i], numeric(loss, f[i]), "f", i);
  double z[6] = {0, 20, -20, 1, 1, 1}, gz[3];  // gates 0, 20, −20; ups 1
  swiglu_forward(z, gz, 1, 3);
  CHECK(gz[0] == 0);
  CHECK(gz[1] == doctest::Approx(20));
  CHECK(gz[2] == doctest::Approx(0).epsilon(1e-6));
}

TEST_CASE("rope: backward is the inverse turn (finite differences), position 0 is unturned, norms are kept") {
  const long S = 3, t = 2 * S, heads = 2, kv = 1, dh = 4, ld = (heads + 2 * kv) * dh;
  auto x = randoms(t * ld, 28), w = randoms(t * ld, 29);
  auto loss = [&] {
    std::vector<double> y = x;
    rope_rotate(y.data(), t, S, heads, kv, dh, false);
    return dot(y, w);
  };
  std::vector<double> grad = w;
  rope_rotate(grad.data(), t, S, heads, kv, dh, true);
  for (size_t i = 0; i < x.size(); ++i) check_close(grad[i], numeric(loss, x[i]), "x", i);
  std::vector<double> y = x;
  rope_rotate(y.data(), t, S, heads, kv, dh, false);
  for (long i = 0; i < t; ++i)
    for (long h = 0; h < heads + 2 * kv; ++h) {
      INFO("token " << i << " head " << h);
      const double* a = x.data() + i * ld + h * dh;
      const double* b = y.data() + i * ld + h * dh;
      double na = 0, nb = 0, moved = 0;
      for (long j = 0; j < dh; ++j) na += a[j] * a[j], nb += b[j] * b[j], moved += std::abs(a[j] - b[j]);
      CHECK(nb == doctest::Approx(na));
      if (i % S == 0 || h >= heads + kv) CHECK(moved == 0);  // position 0, and V heads: untouched
      else CHECK(moved > 1e-3);
    }
  // Token at position 1, pair 0 of head 0 turns by exactly 1 radian: (1, 0) → (cos 1, sin 1).
  std::vector<double> e(size_t(t * ld), 0.0);
  e[size_t(ld)] = 1;
  rope_rotate(e.data(), t, S, heads, kv, dh, false);
  CHECK(e[size_t(ld)] == doctest::Approx(std::cos(1.0)));
  CHECK(e[size_t(ld + dh / 2)] == doctest::Approx(std::sin(1.0)));
}

TEST_CASE("cross-entropy gradient matches finite differences; padding gets none") {
  const long t = 4, vy = 7, vocab = 6;  // the last column is padding
  auto logits = randoms(t * vy, 9, 3.0);
  std::vector<int> targets = {0, 5, 2, 3};
  std::vector<double> dl(t * vy);
  auto cross_entropy = [&](const double* l) {
    const long valid = vocab_valid(vy, 0, vocab);
    std::vector<double> mx(t), st(2 * t);
    cross_entropy_row_max(l, mx.data(), t, vy, valid);
    cross_entropy_exp_sums(l, targets.data(), mx.data(), dl.data(), st.data(), t, vy, 0, valid);
    return cross_entropy_finish(targets.data(), mx.data(), st.data(), dl.data(), t, vy, 0, valid, 1.0);
  };
  auto loss = [&] { return cross_entropy(logits.data()); };
  loss();
  std::vector<double> grad = dl;
  for (long i = 0; i < t; ++i)
    for (long j = 0; j < vocab; ++j)
      check_close(grad[i * vy + j], numeric(loss, logits[i * vy + j]), "logit", size_t(i * vy + j));
  for (long i = 0; i < t; ++i) CHECK(grad[i * vy + vy - 1] == 0);
  // Uniform logits over 6 classes: loss = ln 6 per token.
  std::vector<double> flat(t * vy, 0.0);
  CHECK(cross_entropy(flat.data()) ==
        doctest::Approx(4 * std::log(6.0)));
}

// The whole model's gradient of every tensor at three elements (matrices)
// or two (vectors), against central differences of its loss.
static void check_model_gradients(const ModelSpec& m) {
  Config c;
  c.micro_batch = 2;
  auto dev = make_cpu_device();
  MpiComm comm(MPI_COMM_SELF, c.grid, c.order, *dev);
  Gpt<double> model(comm, m, c, 7);
  std::vector<int> tokens = {1, 4, 9, 2, 7, 3, 3, 10, 0, 5};  // two sequences of S + 1
  model.zero_grad();
  model.micro_step(tokens.data(), 1.0);
  // Analytic gradients first: micro_step accumulates, so copy them out.
  const ParamLayout& L = model.layout();
  std::vector<std::vector<double>> gm, gv;
  for (size_t i = 0; i < L.matrices.size(); ++i)
    gm.emplace_back(model.matrix_grads(int(i)), model.matrix_grads(int(i)) + L.matrices[i].shard_n);
  for (size_t i = 0; i < L.vectors.size(); ++i)
    gv.emplace_back(model.vector_grads(int(i)), model.vector_grads(int(i)) + L.vectors[i].n);
  auto loss = [&] { return model.micro_step(tokens.data(), 1.0); };
  int checked = 0;
  for (size_t i = 0; i < L.matrices.size(); ++i)
    for (size_t e : {size_t(0), L.matrices[i].shard_n / 2, L.matrices[i].shard_n - 1}) {
      // Embedding rows of tokens never seen have zero gradient: pick a seen
      // one (tied, every row has the head's gradient as well).
      size_t el = L.matrices[i].name == "embedding" ? size_t(tokens[e % 3]) * size_t(m.hidden) + e % 8 : e;
      INFO(L.matrices[i].name);
      check_close(gm[i][el], numeric(loss, model.matrix_values(int(i))[el], 1e-5), "element", el);
      ++checked;
    }
  for (size_t i = 0; i < L.vectors.size(); ++i)
    for (size_t e : {size_t(0), L.vectors[i].n - 1}) {
      INFO(L.vectors[i].name);
      check_close(gv[i][e], numeric(loss, model.vector_values(int(i))[e], 1e-5), "element", e);
      ++checked;
    }
  CHECK(checked == 3 * int(L.matrices.size()) + 2 * int(L.vectors.size()));
}

static ModelSpec fd_model() {
  ModelSpec m;
  m.name = "fd";
  m.layers = 2, m.hidden = 8, m.heads = 2, m.ffn = 16, m.vocab = 11, m.padded_vocab = 12, m.seq_len = 4;
  return m;
}

TEST_CASE("the whole model's gradient of every tensor matches finite differences") {
  check_model_gradients(fd_model());
}

TEST_CASE("a Llama-style model's too: GQA with head_dim ≠ H/A, SwiGLU, RMSNorm, RoPE, no bias, tied or not") {
  ModelSpec m = fd_model();
  m.heads = 4, m.kv_heads = 2, m.head_dim = 4, m.ffn = 12;  // A·d_h = 16 ≠ H = 8
  m.mlp = Mlp::SwiGlu, m.norm = Norm::RmsNorm, m.positions = Positions::Rope, m.bias = m.qkv_bias = false;
  for (bool tied : {false, true}) {
    m.tied_embeddings = tied;
    const ParamLayout L = param_layout(m, Grid{});
    // Tensors by hand: embedding, 2 × (qkv, out, gate_up, fc2), and the head unless tied;
    // norms' γ only: 2 × 2 + the final one; no positions, no biases.
    CHECK(L.matrices.size() == (tied ? 9u : 10u));
    CHECK(L.vectors.size() == 5u);
    CHECK(L.matrices[1].cols == (4 + 2 * 2) * 4);  // QKV: (A + 2·A_kv)·d_h
    CHECK(L.matrices[3].cols == 2 * 12);           // gate and up
    INFO("tied " << tied);
    check_model_gradients(m);
  }
}
