// The engine's command line is defined once (engine_args.hpp): what the
// advisor spells, the engine's own parser reads back unchanged.
#include <doctest/doctest.h>

#include <map>
#include <string>

#include <CLI/CLI.hpp>

#include "advisor/core/engine_args.hpp"
#include "advisor/output/launch.hpp"
#include "tests/helpers.hpp"

namespace {

ff::EngineArgs parse(const std::vector<std::string>& argv) {
  ff::EngineArgs a;
  CLI::App app;
  ff::add_engine_options(app, a);
  std::vector<std::string> rev(argv.rbegin(), argv.rend());  // CLI11 takes them last first
  app.parse(rev);
  return a;
}

}  // namespace

TEST_CASE("every flag the advisor spells, the engine reads back as it was") {
  ff::EngineArgs a;
  a.model = "gpt-80b";
  a.grid = "2,1,4,8";
  a.order = "zxyd";
  a.micro_batch = 3;
  a.recompute = {""};  // bare --recompute: full
  a.overlap = "oar,oag";
  a.dtype = "fp64";
  a.batch = 96;
  a.steps = 7;
  a.data = "/tmp/text";
  a.record = "/tmp/run.json";
  a.trace_comm = "/tmp/trace.json";
  a.lr = 3e-4;
  a.seed = 99;
  a.bench = true;
  a.quiet = true;
  a.shard_optimizer = true;
  a.dp_bucket_mib = 0.125;
  a.offload = true;
  a.offload_bucket = 1000;
  a.offload_chunk = 3;
  a.clip = 0;
  a.grad_dtype = "fp64";
  CHECK(parse(ff::engine_argv(a)) == a);
  // The paced device's description travels whole.
  a.device = "paced";
  a.pace_gflops = 3.5;
  a.pace_gbps = 0.75;
  a.poll_us = 20;
  a.pace_host_gbps = 0.03;
  CHECK(parse(ff::engine_argv(a)) == a);
  CHECK(parse(ff::engine_argv(ff::EngineArgs{})) == ff::EngineArgs{});
}

TEST_CASE("a configuration's launch arguments: the configuration, on a device the engine has") {
  ff::Config c{{1, 2, 4, 2}, ff::parse_order("yxzd"), 2, ff::Recompute::Full, ff::Overlap{false, true, false}, ff::Dtype::BF16};
  std::string note;
  ff::EngineArgs a = ff::engine_args("gpt-5b", c, 64, &note);
  CHECK(ff::join_args(ff::engine_argv(a)) ==
        "--model gpt-5b --grid 1,2,4,2 --order yxzpd --micro-batch 2 --recompute --overlap ors --device cpu "
        "--dtype bf16 --batch 64");
  CHECK(note.empty());

  c.dtype = ff::Dtype::FP16;  // no fp16 in the engine: fp32, and the user is told
  a = ff::engine_args("gpt-5b", c, 64, &note);
  CHECK(a.dtype == "fp32");
  CHECK(note.find("fp16") != std::string::npos);

  c.dtype = ff::Dtype::FP32;
  a = ff::engine_args("gpt-5b", c, 64, &note);
  CHECK(a.dtype == "fp32");
  CHECK(note.empty());

  // The job's gradient dtype (MODEL.md §13): bf16 gradients are named; an
  // fp16 plan runs in fp32, gradients too, and says so.
  c.dtype = ff::Dtype::BF16;
  a = ff::engine_args("gpt-5b", c, 64, &note, "cpu", ff::Dtype::BF16);
  CHECK(ff::join_args(ff::engine_argv(a)).find("--dtype bf16 --grad-dtype bf16") != std::string::npos);
  CHECK(ff::engine_grad_dtype(a) == "bf16");
  CHECK(ff::config_of(a).dtype == ff::Dtype::BF16);
  c.dtype = ff::Dtype::FP16;
  a = ff::engine_args("gpt-5b", c, 64, &note, "cpu", ff::Dtype::FP16);
  CHECK(a.grad_dtype.empty());
  CHECK(ff::engine_grad_dtype(a) == "fp32");
  CHECK(note.find("gradients too") != std::string::npos);
}

TEST_CASE("--grad-dtype: fp32 or the training dtype, else exit 2 naming the flag") {
  ff::EngineArgs a;
  CHECK(ff::engine_grad_dtype(a) == "fp32");
  a.dtype = "fp64";
  CHECK(ff::engine_grad_dtype(a) == "fp64");
  a.grad_dtype = "fp32";
  CHECK(fftest::input_error_of([&] { ff::config_of(a); }).find("--grad-dtype fp32: expected fp64") == 0);
  a.dtype = "fp32";
  a.grad_dtype = "bf16";
  CHECK(fftest::input_error_of([&] { ff::config_of(a); }) ==
        "--grad-dtype bf16: expected fp32 or the training dtype (--dtype fp32)");
  a.dtype = "bf16";
  CHECK_NOTHROW(ff::config_of(a));
  a.grad_dtype = "fp16";
  CHECK(fftest::input_error_of([&] { ff::config_of(a); }) ==
        "--grad-dtype fp16: expected fp32 or the training dtype (--dtype bf16)");
}

TEST_CASE("the mpirun line runs odp with the bucket size the profile priced") {
  ff::Job job{fftest::toy_model(), 8, 16, ff::Dtype::FP32};
  ff::MachineProfile m = fftest::toy_machine(4);
  m.dp_bucket_bytes = 64.0 * 1048576;
  ff::Config c{{1, 1, 1, 8}, ff::Order(), 1, ff::Recompute::None, ff::Overlap{}, ff::Dtype::FP32};
  c.overlap.odp = true;
  auto line = [&] { return ff::launch_lines(job, "toy.json", m, c).front().line; };
  CHECK(line().find("--overlap odp") != std::string::npos);
  CHECK(line().find("--dp-bucket-mib 64") != std::string::npos);
  CHECK(line().find("-np 8 --map-by ppr:4:node") != std::string::npos);
  c.overlap.odp = false;  // without odp the bucket size is nothing to the engine
  CHECK(line().find("--dp-bucket-mib") == std::string::npos);
}

TEST_CASE("a machine with NVIDIA GPUs gets launch lines on the engine's cuda device, in the plan's dtype") {
  ff::Job job{fftest::toy_model(), 8, 16, ff::Dtype::BF16};
  ff::MachineProfile m = fftest::toy_machine(4);
  ff::Config c{{1, 1, 2, 4}, ff::Order(), 1, ff::Recompute::None, ff::Overlap{}, ff::Dtype::BF16};
  auto first = [&] { return ff::launch_lines(job, "toy.json", m, c).front(); };
  CHECK(first().line.find("--device cpu --dtype bf16") != std::string::npos);  // the default: no engine_device
  m.engine_device = "cuda";
  CHECK(first().line.find("--device cuda --dtype bf16") != std::string::npos);
  CHECK(first().note.empty());
  c.dtype = ff::Dtype::FP16;  // a V100 plan: the engine has no fp16
  const ff::LaunchLine l = first();
  CHECK(l.line.find("--device cuda --dtype fp32") != std::string::npos);
  CHECK(l.note.find("cuda device has no fp16 kernels") != std::string::npos);
}

TEST_CASE("a pace given in the flags' units comes back as written, on the launch line and in the paced profile") {
  // 50 µs → 5e-5 s → 49.99999999999999 µs by plain arithmetic; a launch line
  // and a report say what was given.
  ff::DevicePace p{2e9, 0.5e9, 50 * 1e-6, 0.3e9};
  ff::EngineArgs a;
  a.device = "paced";
  ff::set_pace(a, p);
  CHECK(a.poll_us == 50);
  CHECK(a.pace_gflops == 2);
  CHECK(a.pace_gbps == 0.5);
  CHECK(a.pace_host_gbps == 0.3);
  CHECK(ff::join_args(ff::engine_argv(a))
            .find("--device paced --pace-gflops 2 --pace-gbps 0.5 --poll-us 50 --pace-host-gbps 0.3 --dtype fp32") !=
        std::string::npos);
  for (double us : {15.0, 12.5, 123.0, 0.75}) CHECK(ff::as_written(us * 1e-6 * 1e6) == us);
  nlohmann::json j = ff::paced_profile_json(nlohmann::json::object(), p);
  CHECK(j["paced_device"] == nlohmann::json{{"gemm_gflops", 2}, {"gbps", 0.5}, {"poll_us", 50}, {"host_gbps", 0.3}});
}

TEST_CASE("the paced profile's host link is the pace, for every GPU of a node at once") {
  // A machine whose node link would share 20 GB/s among 4 GPUs: on the paced
  // device each rank has its own copy engines at the pace.
  nlohmann::json m = {{"gpus_per_node", 4},
                      {"memory", {{"capacity_GiB", 16}}},
                      {"host", {{"link_GBps", 25}, {"node_link_GBps", 20}, {"memory_GiB", 256}}}};
  nlohmann::json j = ff::paced_profile_json(m, ff::DevicePace{2e9, 0.5e9, 50e-6, 0.1e9});
  CHECK(j["host"]["link_GBps"] == 0.1);
  CHECK_FALSE(j["host"].contains("node_link_GBps"));
  CHECK(j["host"]["memory_GiB"] == 256);  // the host's RAM is the host's
  CHECK(j["host"]["kind"] == "paced");
  m.erase("host");  // none measured: the ranks' RAM (4 ranks of 16 GiB) stands for the node's
  CHECK(ff::paced_profile_json(m, ff::DevicePace{2e9, 0.5e9, 50e-6, 0.1e9})["host"]["memory_GiB"] == 64);
}

// config_of is engine_args' inverse: a configuration spelled as the engine's
// flags and parsed back is the configuration, stages and all.
TEST_CASE("a configuration → the engine's argv → config_of: the same configuration") {
  std::vector<ff::Config> cs;
  cs.push_back(ff::Config{{1, 2, 4, 2}, ff::parse_order("yxzd"), 2, ff::Recompute::Full, ff::Overlap{false, true, false}, ff::Dtype::BF16});
  cs.push_back(ff::Config{{2, 1, 1, 2, 4}, ff::parse_order("pxyzd"), 1, ff::Recompute::None, ff::Overlap{true, true, true, true},
                          ff::Dtype::FP32});
  cs.back().offload = true;
  cs.push_back(ff::Config{{1, 1, 2, 4}, ff::parse_order("dzyx"), 4, ff::Recompute::None, ff::Overlap{}, ff::Dtype::FP32});
  cs.back().shard_optimizer = true;
  for (const ff::Config& c : cs) {
    CAPTURE(ff::config_label(c));
    CHECK(ff::config_of(parse(ff::engine_argv(ff::engine_args("gpt-tiny", c, 16)))) == c);
  }
}

TEST_CASE("--grid: four sizes take the stages from --pipeline, five spell them (xyzpd)") {
  ff::ConfigFlags f;
  f.grid = "2,1,1,4,2";
  CHECK(ff::config_of(f).grid == ff::Grid{2, 1, 1, 2, 4});  // Grid's fields: x, y, z, d, p
  f.pipeline = 4;  // the same count twice is one
  CHECK(ff::config_of(f).grid == ff::Grid{2, 1, 1, 2, 4});
  f.pipeline = 2;
  CHECK(fftest::input_error_of([&] { ff::config_of(f); }) ==
        "--grid 2,1,1,4,2 says 4 pipeline stages and --pipeline 2 says otherwise: give one");
  f.grid = "2,1,1,2";
  CHECK(ff::config_of(f).grid == ff::Grid{2, 1, 1, 2, 2});
  f.pipeline = 0;
  CHECK(fftest::input_error_of([&] { ff::config_of(f); }) == "--pipeline 0: expected a number of stages >= 1");
  f.pipeline = 1;
  f.micro_batch = 0;
  CHECK(fftest::input_error_of([&] { ff::config_of(f); }) == "--micro-batch 0: expected sequences per rank >= 1");
  f.micro_batch = 1;
  f.grid = "2,1,1";
  CHECK(fftest::input_error_of([&] { ff::config_of(f); }) ==
        "--grid '2,1,1': expected four sizes X,Y,Z,D, e.g. 4,2,16,8 (stages from --pipeline P), or five X,Y,Z,P,D");
  f.grid = "1,1,1,1";
  f.overlap = "oar,xyz";
  CHECK(fftest::input_error_of([&] { ff::config_of(f); }) ==
        "--overlap 'oar,xyz': unknown 'xyz' (expected a list of oar, ors, oag, odp, otp; or none, all)");
}

TEST_CASE("the Megatron line carries the model's shape; the engine runs a Llama model but not an odd rotary head") {
  ff::Config c{{1, 8, 1, 4}, ff::Order(), 1, ff::Recompute::Full, ff::Overlap{}, ff::Dtype::BF16};
  const ff::MachineProfile m = ff::load_machine("dgx-h100");
  auto lines = [&](const ff::Job& job) {
    std::map<std::string, ff::LaunchLine> by_name;
    for (const auto& l : ff::launch_lines(job, job.model.name, m, c)) by_name[l.name] = l;
    return by_name;
  };
  // Llama 3 8B: GQA with 8 KV heads, head size 128 = H/A (no --kv-channels),
  // SwiGLU, RMSNorm, RoPE, no biases, untied.
  auto llama = lines(ff::Job{ff::load_model("llama3-8b"), 32, 64, ff::Dtype::BF16});
  const std::string mega = llama["megatron-axonn"].line;
  for (const char* flag : {" --num-layers 32", " --hidden-size 4096", " --num-attention-heads 32",
                           " --ffn-hidden-size 14336", " --group-query-attention --num-query-groups 8", " --swiglu",
                           " --normalization RMSNorm", " --position-embedding-type rope", " --disable-bias-linear",
                           " --untie-embeddings-and-output-weights", " --seq-length 8192"}) {
    CAPTURE(flag);
    CHECK(mega.find(flag) != std::string::npos);
  }
  CHECK(mega.find("--kv-channels") == std::string::npos);
  CHECK(mega.find("--add-qkv-bias") == std::string::npos);
  CHECK(llama["mpirun"].note.empty());  // the engine runs Llama-style blocks
  // But not rotary positions on an odd head size (pairs of columns turn).
  ff::ModelSpec odd = ff::load_model("llama3-8b");
  odd.head_dim = 127;
  auto odd_lines = lines(ff::Job{odd, 32, 64, ff::Dtype::BF16});
  CHECK(odd_lines["mpirun"].note.find("the engine cannot run this model (rotary positions") != std::string::npos);
  // A GPT model: the defaults but the untied head, and its engine lines stand.
  auto gpt = lines(ff::Job{ff::load_model("gpt-5b"), 32, 64, ff::Dtype::BF16});
  for (const char* flag : {" --swiglu", " --normalization", " --position-embedding-type", " --disable-bias-linear",
                           " --group-query-attention"}) {
    CAPTURE(flag);
    CHECK(gpt["megatron-axonn"].line.find(flag) == std::string::npos);
  }
  CHECK(gpt["megatron-axonn"].line.find(" --untie-embeddings-and-output-weights") != std::string::npos);
  CHECK(gpt["mpirun"].note.empty());
}
