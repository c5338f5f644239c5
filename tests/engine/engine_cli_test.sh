#!/usr/bin/env bash
# The engine end to end under mpirun: a run record as MODEL.md §3 says, the same
# bytes per axis as `advisor predict` prices, learning on real text, and every
# bad input or dying rank a clear, prompt, non-zero exit with no record left.
# Usage: engine_cli_test.sh path/to/engine path/to/advisor
set -u
engine=$1
advisor=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
tiny=$root/examples/models/gpt-tiny.json
text=/usr/share/common-licenses/GPL-3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
run="mpirun --oversubscribe -np"

source "$(dirname "$0")/../expect.sh"
no_leftovers() {
  if compgen -G "$tmp/*.tmp.*" >/dev/null || [[ -e $1 ]]; then
    echo "FAIL: $1 or a temporary left behind"
    failures=$((failures + 1))
  else
    echo "ok: nothing left at $1"
  fi
}

# --- a run and its record --------------------------------------------------
cfg=(--grid 2,2,1,2 --order xyzd --micro-batch 2 --recompute --overlap all --batch 16)
expect 0 'final loss' -- $run 8 "$engine" --model "$tiny" "${cfg[@]}" --steps 3 --data "$text" --record "$tmp/run.json"
"$advisor" predict --model "$tiny" --gpus 8 "${cfg[@]}" --dtype fp32 --json >"$tmp/predict.json"
check "run record has MODEL.md §3's fields and the configuration that ran" '
import json, sys
r = json.load(open(sys.argv[1]))
assert r["config"] == {"grid": {"x": 2, "y": 2, "z": 1, "pipe": 1, "data": 2}, "order": "xyzpd", "micro_batch": 2,
                       "recompute": "full", "overlap": {"oar": True, "ors": True, "oag": True, "odp": False, "otp": False}, "dtype": "fp32",
                       "grad_dtype": "fp32",
                       "offload": False, "shard_optimizer": False, "sequence_parallel": False,
                       "virtual_stages": 1}, r["config"]
assert r["model"] == "gpt-tiny" and r["ranks"] == 8
assert len(r["steps"]) == 3
for s in r["steps"]:
    assert set(s["comm_s"]) == {"x", "y", "z", "pipe", "data"}
    assert 0 < s["compute_s"] <= s["time_s"] and s["loss"] > 0
    assert s["comm_s"]["z"] == 0  # G_z = 1: no Z collectives at all
assert len(r["peak_memory_bytes"]) == 8 and min(r["peak_memory_bytes"]) > 1e6
assert r["final_loss"] == r["steps"][-1]["loss"]
p = r["provenance"]
assert p["host"] and "MPI" in p["mpi"] and "OpenBLAS" in p["blas"] and p["git"] and "--grid 2,2,1,2" in p["command"]
' "$tmp/run.json"
check "bytes per axis equal what advisor predict prices for the same flags" '
import json, sys
r, p = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert r["bytes_per_step"] == p["bytes_per_step"], (r["bytes_per_step"], p["bytes_per_step"])
' "$tmp/run.json" "$tmp/predict.json"
# And with Z split, where gathers, reduce-scatters and the replicated reduction over Z appear.
cfg2=(--grid 1,2,2,2 --order zyxd --micro-batch 1 --overlap ors --batch 8)
expect 0 'final loss' -- $run 8 "$engine" --model "$tiny" "${cfg2[@]}" --steps 2 --record "$tmp/run2.json"
"$advisor" predict --model "$tiny" --gpus 8 "${cfg2[@]}" --dtype fp32 --json >"$tmp/predict2.json"
check "bytes per axis equal advisor predict with Z split" '
import json, sys
r, p = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert r["bytes_per_step"]["z"] > 0
assert r["bytes_per_step"] == p["bytes_per_step"], (r["bytes_per_step"], p["bytes_per_step"])
' "$tmp/run2.json" "$tmp/predict2.json"

# ODP's buckets and a sharded optimizer: the data-parallel bytes (reduce-
# scatter plus the weights' all-gather) equal the advisor's for the same flags.
cfg3=(--grid 1,1,2,4 --micro-batch 1 --batch 16 --overlap ors,odp --shard-optimizer)
expect 0 'final loss' -- $run 8 "$engine" --model "$tiny" "${cfg3[@]}" --dp-bucket-mib 0.05 --steps 2 --record "$tmp/run3.json"
"$advisor" predict --model "$tiny" --gpus 8 "${cfg3[@]}" --dtype fp32 --json >"$tmp/predict3.json"
check "odp and a sharded optimizer: buckets in the record, bytes equal advisor predict" '
import json, sys
r, p = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
dp = r["data_parallel"]
assert dp["odp"] and dp["shard_optimizer"] and dp["buckets"] > 1 and dp["bucket_bytes"] == 0.05 * 1048576, dp
assert r["bytes_per_step"] == p["bytes_per_step"], (r["bytes_per_step"], p["bytes_per_step"])
' "$tmp/run3.json" "$tmp/predict3.json"
expect 0 'G_data = 1: nothing to shard over' -- $run 2 "$engine" --model "$tiny" --grid 2,1,1,1 --shard-optimizer --steps 1

# A Llama-style model (MODEL.md §12: GQA with A·d_h ≠ H, SwiGLU, RMSNorm,
# RoPE, no biases): its bytes per axis are what the advisor prices for it;
# tied and over two stages, the embedding group's all-reduce on the pipe
# axis too, per stage.
llama=$root/tests/engine/llama-exact.json
cfg_l=(--grid 2,2,1,2 --micro-batch 2 --batch 8 --overlap all)
expect 0 'final loss' -- $run 8 "$engine" --model "$llama" "${cfg_l[@]}" --steps 2 --record "$tmp/run_l.json"
"$advisor" predict --model "$llama" --gpus 8 "${cfg_l[@]}" --dtype fp32 --json >"$tmp/predict_l.json"
check "llama-style: bytes per axis equal advisor predict" '
import json, sys
r, p = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert r["model"] == "llama-exact"
assert r["bytes_per_step"] == p["bytes_per_step"], (r["bytes_per_step"], p["bytes_per_step"])
' "$tmp/run_l.json" "$tmp/predict_l.json"
tied=$tmp/llama-tied.json
python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); m.update(name="llama-tied", layers=4, tied_embeddings=True); json.dump(m, open(sys.argv[2], "w"))' \
  "$llama" "$tied"
cfg_t=(--grid 1,2,2,1 --pipeline 2 --micro-batch 1 --batch 8 --overlap all)
expect 0 'final loss' -- $run 8 "$engine" --model "$tied" "${cfg_t[@]}" --steps 2 --record "$tmp/run_t.json"
"$advisor" predict --model "$tied" --gpus 8 "${cfg_t[@]}" --dtype fp32 --json >"$tmp/predict_t.json"
check "llama-style, tied, two stages: per stage, bytes equal advisor predict" '
import json, sys
r, p = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert len(r["stages"]) == len(p["pipeline"]["per_stage"]) == 2, (r["stages"], p["pipeline"])
for got, want in zip(r["stages"], p["pipeline"]["per_stage"]):
    assert got["bytes_per_step"] == want["bytes_per_step"], (got, want)
' "$tmp/run_t.json" "$tmp/predict_t.json"

# Pipeline stages: per stage, the bytes of every axis equal the advisor's
# for the same flags (its messages on P included), and a busy/idle split.
model4=$tmp/gpt-4l.json
python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); m.update(name="gpt-4l", layers=4); json.dump(m, open(sys.argv[2], "w"))' \
  "$tiny" "$model4"
cfg4=(--grid 2,1,1,2 --pipeline 2 --micro-batch 1 --batch 8 --overlap all)
expect 0 'final loss' -- $run 8 "$engine" --model "$model4" "${cfg4[@]}" --steps 2 --record "$tmp/run4.json" \
  --trace-comm "$tmp/trace4.json"
"$advisor" predict --model "$model4" --gpus 8 "${cfg4[@]}" --dtype fp32 --json >"$tmp/predict4.json"
check "pipeline: per stage, bytes equal advisor predict; busy and idle recorded" '
import json, sys
r, p = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert r["config"]["grid"]["pipe"] == 2 and len(r["stages"]) == 2, r["stages"]
for got, want in zip(r["stages"], p["pipeline"]["per_stage"]):
    assert got["bytes_per_step"] == want["bytes_per_step"], (got, want)
    assert got["bytes_per_step"]["pipe"] > 0 and got["busy_s"] > 0 and got["idle_s"] >= 0, got
' "$tmp/run4.json" "$tmp/predict4.json"
# Sequence parallelism (MODEL.md §13) over two stages with X split too: per
# stage, the reduce-scatters and all-gathers over Y, the norms' gradient sum
# and the split stage messages equal what the advisor prices.
cfg_sp=(--grid 2,2,1,1 --pipeline 2 --micro-batch 1 --batch 8 --overlap all --sequence-parallel)
expect 0 'final loss' -- $run 8 "$engine" --model "$model4" "${cfg_sp[@]}" --steps 2 --record "$tmp/run_sp.json"
"$advisor" predict --model "$model4" --gpus 8 "${cfg_sp[@]}" --dtype fp32 --json >"$tmp/predict_sp.json"
check "sequence parallel, two stages: per stage, bytes equal advisor predict" '
import json, sys
r, p = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert r["config"]["sequence_parallel"] and len(r["stages"]) == 2, r["config"]
for got, want in zip(r["stages"], p["pipeline"]["per_stage"]):
    assert got["bytes_per_step"] == want["bytes_per_step"], (got, want)
' "$tmp/run_sp.json" "$tmp/predict_sp.json"
expect 2 'has G_y = 1' -- $run 2 "$engine" --model "$tiny" --grid 2,1,1,1 --sequence-parallel --steps 1


# Interleaved (--virtual-stages 2, MODEL.md §9): a micro-batch crosses each
# stage boundary twice, so the stage messages, and every stage's pipe bytes,
# are what advisor predict prices for v = 2 (3 messages a micro-batch on each
# of 2 stages, where v = 1 has 1); the rest as without it. GPT with odp and a
# sharded optimizer; the tied Llama-style model with Y, Z and every overlap.
cfg_v=(--grid 2,1,1,2 --pipeline 2 --virtual-stages 2 --micro-batch 1 --batch 8 --overlap all --shard-optimizer)
cfg_vt=(--grid 1,2,2,1 --pipeline 2 --virtual-stages 2 --micro-batch 1 --batch 8 --overlap all)
expect 0 'final loss' -- $run 8 "$engine" --model "$model4" "${cfg_v[@]}" --steps 2 \
  --record "$tmp/run_v.json"
"$advisor" predict --model "$model4" --gpus 8 "${cfg_v[@]}" --dtype fp32 --json \
  >"$tmp/predict_v.json"
expect 0 'final loss' -- $run 8 "$engine" --model "$tied" "${cfg_vt[@]}" --steps 2 \
  --record "$tmp/run_vt.json"
"$advisor" predict --model "$tied" --gpus 8 "${cfg_vt[@]}" --dtype fp32 --json \
  >"$tmp/predict_vt.json"
check "interleaved: per stage, bytes equal advisor predict (pipe 3x the plain stages'); the memory model's terms" '
import json, sys
plain = json.load(open(sys.argv[1]))
for rec, pred in ((sys.argv[2], sys.argv[3]), (sys.argv[4], sys.argv[5])):
    r, p = json.load(open(rec)), json.load(open(pred))
    assert r["config"]["virtual_stages"] == 2 and len(r["stages"]) == 2, r["config"]
    for got, want in zip(r["stages"], p["pipeline"]["per_stage"]):
        assert got["bytes_per_step"] == want["bytes_per_step"], (rec, got, want)
    assert r["memory_predicted_bytes"] == dict(p["memory_bytes"], reserve=0.0), (rec, r["memory_predicted_bytes"])
r = json.load(open(sys.argv[2]))
for got, one in zip(r["stages"], plain["stages"]):
    assert got["bytes_per_step"]["pipe"] == 3 * one["bytes_per_step"]["pipe"] > 0, (got, one)
' "$tmp/run4.json" "$tmp/run_v.json" "$tmp/predict_v.json" "$tmp/run_vt.json" "$tmp/predict_vt.json"
expect 2 'layers 4 are not divisible by G_pipe·v = 6' -- \
  $run 2 "$engine" --model "$model4" --grid 1,1,1,1 --pipeline 2 --virtual-stages 3 --record "$tmp/bad.json"
expect 2 '3 micro-batches per pipeline are not a multiple of G_pipe = 2' -- \
  $run 2 "$engine" --model "$model4" --grid 1,1,1,1 --pipeline 2 --virtual-stages 2 --batch 3
expect 2 'with --stage-layers' -- \
  $run 2 "$engine" --model "$model4" --grid 1,1,1,1 --pipeline 2 --virtual-stages 2 --stage-layers 1,3 --batch 4
expect 2 'virtual-stages 2 with --device cuda' -- \
  $run 2 "$engine" --model "$model4" --grid 1,1,1,1 --pipeline 2 --virtual-stages 2 --device cuda
# --trace-comm on the same run: every operation of every rank, stage messages
# and the overlap flags' non-blocking collectives included, complete, and
# adding up to the bytes each stage records. Order xyzpd on 2,1,1,2 with 2
# stages: rank = x + 2·(p + 2·d), so rank r is in stage (r // 2) % 2.
check "trace: each rank's events per step add up to its stage's bytes; every one completed" '
import json, sys
t, r = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert t["format"] == "fourfold-comm-trace/1" and t["fields"][:4] == ["step", "axis", "kind", "bytes"]
assert len(t["ranks"]) == 8
for rank, events in enumerate(t["ranks"]):
    kinds = {e[2] for e in events}
    assert kinds == {"blocking", "nonblocking", "message"}, (rank, kinds)
    for step, axis, kind, nbytes, ready, start, end in events:
        assert ready <= start <= end, (rank, step, axis, kind, ready, start, end)
    for step in (0, 1):
        got = {}
        for e in events:
            if e[0] == step:
                got[e[1]] = got.get(e[1], 0) + e[3]
        want = {a: b for a, b in r["stages"][(rank // 2) % 2]["bytes_per_step"].items() if b}
        assert got == want, (rank, step, got, want)
' "$tmp/trace4.json" "$tmp/run4.json"
# With nothing overlapped every wait is a traced blocking call: per step, the
# ranks' mean time inside them is the record's blocked time, axis by axis.
# Default order xyzpd on 1,2,1,2: rank = y + 2·d, so Y pairs {0,1}, {2,3} and
# D pairs {0,2}, {1,3}; a group's members issue the same operations.
expect 0 'final loss' -- $run 4 "$engine" --model "$tiny" --grid 1,2,1,2 --batch 4 --steps 3 --record "$tmp/run6.json" \
  --trace-comm "$tmp/trace6.json"
check "trace: blocking calls add up to the blocked time; group members issue the same operations" '
import json, sys
t, r = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
ranks = t["ranks"]
assert len(ranks) == 4 and all(e[2] == "blocking" for events in ranks for e in events)
for s in r["steps"]:
    for axis, blocked in s["comm_s"].items():
        traced = sum(e[6] - e[5] for events in ranks for e in events if e[0] == s["step"] and e[1] == axis) / 4
        assert abs(traced - blocked) <= 1e-9 + 1e-9 * blocked, (s["step"], axis, traced, blocked)
    assert s["comm_s"]["y"] > 0 and s["comm_s"]["data"] > 0, s["comm_s"]
ops = lambda rank, axis: [(e[0], e[3]) for e in ranks[rank] if e[1] == axis]
for axis, groups in (("y", [(0, 1), (2, 3)]), ("data", [(0, 2), (1, 3)])):
    for a, b in groups:
        assert ops(a, axis) and ops(a, axis) == ops(b, axis), (axis, a, b)
' "$tmp/trace6.json" "$tmp/run6.json"
# Offload: Adam's state streamed through bucket buffers, the data-parallel
# all-reduce in chunks; the host link's bytes each way equal advisor
# predict's for the same flags (8 B a parameter in fp32: m and v).
cfg5=(--grid 2,1,1,2 --micro-batch 1 --batch 8 --offload)
expect 0 'offload: [0-9]+ buckets of 4096 elements in [0-9]+ all-reduce chunks' -- $run 4 "$engine" --model "$tiny" \
  "${cfg5[@]}" --offload-bucket 4096 --offload-chunk 2 --clip 0 --steps 3 --record "$tmp/run5.json"
"$advisor" predict --model "$tiny" --gpus 4 --machine perlmutter "${cfg5[@]}" --dtype fp32 --json \
  >"$tmp/predict5.json"
check "offload: buckets and chunks in the record, copy bytes each way and the memory terms equal advisor predict" '
import json, sys
r, p = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
o = r["offload"]
assert o["enabled"] and not o["clipping"] and o["chunk_buckets"] == 2 and o["chunks"] > 1, o
assert o["buckets_per_step"] >= 2 * o["chunks"] - 1, o  # every chunk but the last holds 2 buckets
assert o["copy_bytes_each_way"] == p["offload"]["copy_bytes_each_way"], (o, p["offload"])
assert 0 < o["copy_s_per_step"] and 0 <= o["hidden_s_per_step"] <= o["copy_s_per_step"], o
# The memory model beside the measured peak: the terms of predict, less the reserve of the machine.
m, want = r["memory_predicted_bytes"], dict(p["memory_bytes"], reserve=0.0)
assert m == want and m["states"] > 0 and m["host"] > 0, (m, want)
' "$tmp/run5.json" "$tmp/predict5.json"
expect 0 'final loss' -- $run 4 "$engine" --model "$model4" --grid 1,1,1,2 --pipeline 2 --offload --batch 8 --steps 2
expect 2 'offload with --shard-optimizer' -- $run 2 "$engine" --model "$tiny" --grid 1,1,1,2 --offload --shard-optimizer
expect 2 '--offload-bucket 0: expected elements >= 1' -- $run 1 "$engine" --model "$tiny" --offload --offload-bucket 0
expect 2 'clip: expected a norm' -- $run 1 "$engine" --model "$tiny" --clip -1
expect 2 "--recompute 'some': expected none, selective or full" -- $run 1 "$engine" --model "$tiny" --recompute some
expect 0 'final loss' -- $run 2 "$engine" --model "$tiny" --grid 1,2,1,1 --recompute selective --steps 1
odd=$tmp/llama-odd.json
python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); m.update(name="llama-odd", head_dim=3); json.dump(m, open(sys.argv[2], "w"))' \
  "$llama" "$odd"
expect 2 'head_dim 3 is odd' -- $run 1 "$engine" --model "$odd" --steps 1
expect 2 'stages 4 > layers 2' -- $run 4 "$engine" --model "$tiny" --grid 1,1,1,1 --pipeline 4 --record "$tmp/bad.json"
expect 2 "--stage-layers: the stages' blocks add up to 3, not the model's 4 layers" -- \
  $run 2 "$engine" --model "$model4" --grid 1,1,1,1 --pipeline 2 --stage-layers 1,2
expect 0 'final loss' -- $run 2 "$engine" --model "$model4" --grid 1,1,1,1 --pipeline 2 --stage-layers 1,3 --steps 1
expect 2 'has 8 cells but 4 ranks' -- $run 4 "$engine" --model "$model4" --grid 2,1,1,2 --pipeline 2 --record "$tmp/bad.json"

# The same run on the paced device: the cpu's results (to fp32 rounding: a
# paced rank waits on MPI_Iallreduce & co., whose reduction order in Open MPI
# is not MPI_Allreduce's; the first step, before any reduced gradient is
# applied, bit for bit), each
# step's device time the model's compute for the same pace (MODEL.md's
# counts are what the paced kernels charge: hand-checked in engine/README.md),
# and no step shorter than its device time.
expect 0 'paced device' -- $run 8 "$engine" --model "$tiny" "${cfg2[@]}" --steps 2 --device paced --pace-gflops 4 \
  --pace-gbps 1 --poll-us 40 --record "$tmp/paced.json"
# The model's compute for that pace: the machine's compute replaced by the
# pace (advisor/inputs/device_pace.cpp's rule, written out here independently),
# priced at the engine's fusion level (flash attention's backward as 7 tile
# products, MODEL.md §10).
python3 - "$root/profiles/cpu-8x2core.json" "$tiny" "$tmp" <<'PY'
import json, sys
p, m, tmp = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
p["compute"] = {"kind": "paced", "source": "test", "peak_tflops": {"bf16": 0.004, "fp32": 0.004}, "attention_efficiency": 1}
p["gemm"] = {"m": [1], "n": [1], "k": [1], "bf16": [[[1]]], "fp32": [[[1]]]}
p["memory"].update(hbm_GBps=1, elementwise_efficiency=1)
json.dump(p, open(tmp + "/paced_profile.json", "w"))
PY
"$advisor" predict --model "$tiny" --gpus 8 "${cfg2[@]}" --dtype fp32 --fusion engine \
  --machine "$tmp/paced_profile.json" --json >"$tmp/predict_paced.json"
check "paced: the cpu run losses, the device's time, the pace in the record" '
import json, sys
r, c = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert r["steps"][0]["loss"] == c["steps"][0]["loss"], (r["steps"], c["steps"])
for a, b in zip(r["steps"], c["steps"]):
    assert abs(a["loss"] / b["loss"] - 1) < 1e-6, (a, b)
d = r["device"]
assert d["name"] == "paced" and d["pace"] == {"gemm_gflops": 4, "gbps": 1, "poll_us": 40, "host_gbps": 0.1}, d
assert len(d["busy_s_per_rank"]) == 8 and len(d["late_s_per_rank"]) == 8
for s in r["steps"]:
    assert 0 < s["device_s"] <= s["time_s"], s
assert c["device"] == {"name": "cpu"}
# The engine adds the first micro-step weight gradients without a pass of
# their own, which the model charges: within 5%.
p = json.load(open(sys.argv[3]))["compute_s"]
assert abs(r["steps"][-1]["device_s"] / p - 1) < 0.05, (r["steps"][-1]["device_s"], p)
' "$tmp/paced.json" "$tmp/run2.json" "$tmp/predict_paced.json"
# The Llama-style model's kernels charge what MODEL.md §12 prices (GQA
# attention on A·d_h, SwiGLU, RMSNorm, RoPE, the lookup without positions),
# with the unfused attention a model file may name (its S×S GEMMs and softmax).
python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); m["attention"] = "unfused"; json.dump(m, open(sys.argv[2], "w"))' \
  "$llama" "$tmp/llama_unfused.json"
expect 0 'paced device' -- $run 8 "$engine" --model "$tmp/llama_unfused.json" "${cfg2[@]}" --steps 2 --device paced \
  --pace-gflops 4 --pace-gbps 1 --poll-us 40 --record "$tmp/paced_l.json"
"$advisor" predict --model "$tmp/llama_unfused.json" --gpus 8 "${cfg2[@]}" --dtype fp32 --fusion engine \
  --machine "$tmp/paced_profile.json" --json >"$tmp/predict_paced_l.json"
check "paced llama-style, unfused: the device's time is the model's compute" '
import json, sys
r, p = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))["compute_s"]
assert r["attention"] == "unfused", r["attention"]
assert abs(r["steps"][-1]["device_s"] / p - 1) < 1e-9, (r["steps"][-1]["device_s"], p)
' "$tmp/paced_l.json" "$tmp/predict_paced_l.json"

# --- kernels by class: the engine's launches are the advisor's inventory ------
# Each run's launches per step, class by class (the record's kernels), equal
# what advisor predict counts at the engine's fusion level (MODEL.md §2,
# "Kernels"): every compute term's launches × its occurrences per step. The
# engine's glue (class copy: stage and recompute copies) has no advisor
# term, and the advisor's launch-bound wait no kernel. GPT and the
# Llama-style model, on one rank (whole rows) and split over X and Y, with
# each kind of recompute; GPT split over Y alone, where QKV's and FC1's
# outputs are whole (their biases, and GELU, in the GEMMs' epilogues) and
# the out-projection's and FC2's partial sums are reduced before their biases.
for spec in "$tiny|1|1,1,1,1|none" "$tiny|1|1,1,1,1|full" "$llama|1|1,1,1,1|selective" "$tiny|4|2,2,1,1|none" \
  "$llama|4|2,2,1,1|full" "$tiny|2|1,2,1,1|none"; do
  IFS='|' read -r m n grid rc <<<"$spec"
  expect 0 'final loss' -- $run "$n" "$engine" --model "$m" --grid "$grid" --micro-batch 2 --batch 4 --recompute "$rc" \
    --steps 2 --record "$tmp/classes.json"
  "$advisor" predict --model "$m" --gpus "$n" --grid "$grid" --micro-batch 2 --batch 4 --recompute "$rc" \
    --fusion engine --machine perlmutter --json >"$tmp/classes_p.json"
  check "launches by class equal advisor predict's: $(basename "$m") on $grid, recompute $rc" '
import json, sys, collections
got = {k: v["launches"] for k, v in json.load(open(sys.argv[1]))["kernels"]["per_step"].items()}
want = collections.Counter()
for c in json.load(open(sys.argv[2]))["compute"]:
    want[c["class"]] += c["launches_each"] * c["per_iteration"]
for k in set(got) | set(want):
    if k not in ("copy", "launch_bound"):
        assert got.get(k, 0) == want.get(k, 0), (k, got.get(k, 0), want.get(k, 0))
assert got["gemm"] > 0 and got["attention"] > 0, got
' "$tmp/classes.json" "$tmp/classes_p.json"
done

# --- bf16: fp32 masters, statistics and gradient reductions ------------------
# What each axis carries in bf16 (weights, activations and messages in 2
# bytes; LayerNorm and cross-entropy statistics, and the per-step gradient
# reductions, in 4) equals what advisor predict prices for the same flags,
# and the losses stay within 1e-2 of fp32's from the same initialisation.
bf16_cfgs=("--grid 2,2,1,2 --micro-batch 2 --batch 16 --overlap all"
  "--grid 1,1,2,4 --micro-batch 1 --batch 16 --overlap ors,odp --shard-optimizer"
  "--grid 1,1,2,2 --pipeline 2 --micro-batch 1 --batch 8 --overlap oag")
for c in "${bf16_cfgs[@]}"; do
  read -ra cf <<<"$c"
  for dt in fp32 bf16; do
    expect 0 'final loss' -- $run 8 "$engine" --model "$tiny" "${cf[@]}" --dp-bucket-mib 0.05 --steps 3 --dtype $dt \
      --record "$tmp/$dt.json"
  done
  "$advisor" predict --model "$tiny" --gpus 8 "${cf[@]}" --dtype bf16 --json >"$tmp/predict_bf16.json"
  check "bf16 ($c): bytes per axis (per stage) equal advisor predict; losses within 1e-2 of fp32" '
import json, sys
b, f, p = (json.load(open(a)) for a in sys.argv[1:4])
assert b["config"]["dtype"] == "bf16", b["config"]
staged = b["config"]["grid"]["pipe"] > 1
got = [s["bytes_per_step"] for s in b["stages"]] if staged else [b["bytes_per_step"]]
want = [s["bytes_per_step"] for s in p["pipeline"]["per_stage"]] if staged else [p["bytes_per_step"]]
assert got == want, (got, want)
for sb, sf in zip(b["steps"], f["steps"]):
    assert abs(sb["loss"] - sf["loss"]) <= 1e-2 * sf["loss"], (sb["loss"], sf["loss"])
assert b["memory_predicted_bytes"] is not None
' "$tmp/bf16.json" "$tmp/fp32.json" "$tmp/predict_bf16.json"
done
# Offload in bf16: the fp32 master travels with m and v (12 B a parameter
# each way), as advisor predict prices it, and the memory terms agree.
expect 0 'final loss' -- $run 4 "$engine" --model "$tiny" "${cfg5[@]}" --offload-bucket 4096 --offload-chunk 2 --clip 0   --steps 3 --dtype bf16 --record "$tmp/run5b.json"
"$advisor" predict --model "$tiny" --gpus 4 --machine perlmutter "${cfg5[@]}" --dtype bf16 --json   >"$tmp/predict5b.json"
check "offload in bf16: copy bytes each way (master, m and v) and the memory terms equal advisor predict" '
import json, sys
r, p, f = (json.load(open(a)) for a in sys.argv[1:4])
o = r["offload"]
assert o["copy_bytes_each_way"] == p["offload"]["copy_bytes_each_way"], (o, p["offload"])
assert o["copy_bytes_each_way"] == 1.5 * f["offload"]["copy_bytes_each_way"], (o, f["offload"])  # 12 B against 8
m, want = r["memory_predicted_bytes"], dict(p["memory_bytes"], reserve=0.0)
assert m == want, (m, want)
' "$tmp/run5b.json" "$tmp/predict5b.json" "$tmp/run5.json"

# --- bf16 gradients (--grad-dtype bf16, MODEL.md §13 "Gradient dtype") -------
# Every per-step gradient reduction moves 2-byte values: the bytes per axis
# (per stage) equal advisor predict's with --grad-dtype bf16 for the same
# flags, over X and Y with blocking per-matrix all-reduces over D; Z with odp
# and a sharded optimizer; a tied model on two stages with sequence
# parallelism (the norms' sum over Y, the embedding group's exchange over P)
# and odp; offload's chunks. Each step's loss within 2e-2 of one rank's with
# bf16 gradients too.
# Entries: model|ranks|flags|the engine's own flags.
gd_cfgs=("$tiny|8|--grid 2,2,1,2 --micro-batch 2 --batch 16 --overlap all|--dp-bucket-mib 0.05"
  "$tiny|8|--grid 1,1,2,4 --micro-batch 1 --batch 16 --overlap ors,odp --shard-optimizer|--dp-bucket-mib 0.05"
  "$tied|8|--grid 1,2,1,2 --pipeline 2 --micro-batch 1 --batch 8 --overlap all,odp --sequence-parallel|--dp-bucket-mib 0.05"
  "$tiny|4|--grid 2,1,1,2 --micro-batch 1 --batch 8 --offload|--offload-bucket 4096 --offload-chunk 2")
for entry in "${gd_cfgs[@]}"; do
  IFS='|' read -r gm gn c own <<<"$entry"
  read -ra cf <<<"$c"
  read -ra ef <<<"$own"
  batch=$(python3 -c 'import sys; a = sys.argv[1:]; print(a[a.index("--batch") + 1])' "${cf[@]}")
  expect 0 'bf16 \(bf16 gradients\)' -- $run "$gn" "$engine" --model "$gm" "${cf[@]}" "${ef[@]}" --steps 3 \
    --dtype bf16 --grad-dtype bf16 --record "$tmp/gd.json"
  expect 0 'final loss' -- $run 1 "$engine" --model "$gm" --micro-batch 2 --batch "$batch" --steps 3 --dtype bf16 \
    --grad-dtype bf16 --record "$tmp/gd1.json"
  "$advisor" predict --model "$gm" --gpus "$gn" "${cf[@]}" --dtype bf16 --grad-dtype bf16 --machine perlmutter --json \
    >"$tmp/predict_gd.json"
  check "bf16 gradients ($c): bytes per axis (per stage) equal advisor predict; losses within 2e-2 of one rank" '
import json, sys
b, one, p = (json.load(open(a)) for a in sys.argv[1:4])
assert b["config"]["grad_dtype"] == one["config"]["grad_dtype"] == "bf16", b["config"]
staged = b["config"]["grid"]["pipe"] > 1
got = [s["bytes_per_step"] for s in b["stages"]] if staged else [b["bytes_per_step"]]
want = [s["bytes_per_step"] for s in p["pipeline"]["per_stage"]] if staged else [p["bytes_per_step"]]
assert got == want, (got, want)
worst = max(abs(sb["loss"] / so["loss"] - 1) for sb, so in zip(b["steps"], one["steps"]))
assert worst <= 2e-2, [(sb["loss"], so["loss"]) for sb, so in zip(b["steps"], one["steps"])]
assert b["memory_note"] and "fp32 storage" in b["memory_note"], b.get("memory_note")
print("  worst relative loss difference against one rank: %.2e" % worst)
' "$tmp/gd.json" "$tmp/gd1.json" "$tmp/predict_gd.json"
done
expect 2 '--grad-dtype bf16: expected fp32 or the training dtype \(--dtype fp32\)' -- \
  $run 1 "$engine" --model "$tiny" --grad-dtype bf16 --record "$tmp/bad.json"
expect 2 '--grad-dtype fp16: expected fp32 or the training dtype \(--dtype bf16\)' -- \
  $run 1 "$engine" --model "$tiny" --dtype bf16 --grad-dtype fp16 --record "$tmp/bad.json"
expect 2 '--grad-dtype fp32: expected fp64' -- $run 1 "$engine" --model "$tiny" --dtype fp64 --grad-dtype fp32 \
  --record "$tmp/bad.json"
no_leftovers "$tmp/bad.json"

# --- the launch line the advisor prints runs as printed -----------------------
# A bf16 plan (the machine's default dtype): the line names the device and
# the plan's dtype, and pasting it (with this build's engine) trains.
"$advisor" predict --model "$tiny" --gpus 4 --machine cpu-8x2core --grid 2,1,1,2 --micro-batch 2 --batch 8 --recompute \
  --overlap all --dtype bf16 --json >"$tmp/launch.json"
line=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["launch"]["mpirun"]["line"])' "$tmp/launch.json")
case $line in
  "mpirun -np 4 --map-by ppr:4:node engine --model $tiny --grid 2,1,1,2 "*"--device cpu --dtype bf16 --batch 8") echo "ok: launch line: $line" ;;
  *) echo "FAIL: launch line: $line"; failures=$((failures + 1)) ;;
esac
expect 0 'final loss' -- ${line/ engine / "$engine" } --steps 2

# --- it learns: byte-level text on 2 ranks --------------------------------
expect 0 'final loss' -- $run 2 "$engine" --model "$tiny" --grid 1,1,1,2 --micro-batch 4 --batch 8 --steps 40 --lr 3e-3 \
  --data "$text" --record "$tmp/learn.json"
check "the loss falls by more than 1.5 nats in 40 steps on real text" '
import json, sys
s = json.load(open(sys.argv[1]))["steps"]
assert s[0]["loss"] - s[-1]["loss"] > 1.5, (s[0]["loss"], s[-1]["loss"])
' "$tmp/learn.json"

# --- the benchmark report ----------------------------------------------------
expect 0 'GEMM rate / BLAS peak' -- $run 1 "$engine" --model "$tiny" --micro-batch 2 --steps 3 --bench

# --- bad input: rank 0 says why, every rank exits, nothing is written --------
expect 2 'has 4 cells but 2 ranks' -- $run 2 "$engine" --model "$tiny" --grid 2,2,1,1 --record "$tmp/bad.json"
expect 2 'heads 4 % G_y 8' -- $run 8 "$engine" --model "$tiny" --grid 1,8,1,1 --record "$tmp/bad.json"
expect 2 'cannot read data file' -- $run 2 "$engine" --model "$tiny" --grid 2,1,1,1 --data "$tmp/missing.txt" --record "$tmp/bad.json"
expect 2 'not a multiple of micro_batch' -- $run 2 "$engine" --model "$tiny" --grid 1,1,1,2 --batch 3 --record "$tmp/bad.json"
expect 2 'fp16, with its loss scaling, is to come' -- $run 1 "$engine" --model "$tiny" --dtype fp16
expect 2 'device gpu: expected cpu, paced or cuda' -- $run 1 "$engine" --model "$tiny" --device gpu
# Where there is no GPU (or no CUDA toolkit at build time), --device cuda says so on every launcher.
if ! nvidia-smi -L >/dev/null 2>&1; then
  expect 2 'device cuda: (no usable GPU|this engine was built without the CUDA toolkit)' -- \
    $run 2 "$engine" --model "$tiny" --grid 1,1,1,2 --device cuda --record "$tmp/bad.json"
fi
expect 2 'unknown model|gpt-5b' -- $run 2 "$engine" --model gpt-nonexistent --grid 2,1,1,1
expect 2 'loss is (nan|inf)' -- $run 2 "$engine" --model "$tiny" --grid 1,2,1,1 --lr 1e30 --steps 20 --record "$tmp/bad.json"
no_leftovers "$tmp/bad.json"

# --- a rank that dies: mpirun ends the job, non-zero, within 30 s ------------
# killed_rank LABEL ENGINE_ARGS...: 4 ranks, one killed at step 2.
killed_rank() {
  local label=$1
  shift
  mpirun --oversubscribe -np 4 "$engine" --model "$tiny" "$@" --steps 100000 --record "$tmp/dead.json" \
    >"$tmp/dead.out" 2>&1 &
  local launcher=$!
  for _ in $(seq 100); do grep -q 'step    2' "$tmp/dead.out" && break; sleep 0.2; done
  local victim
  victim=$(pgrep -P "$launcher" -f engine | tail -1)
  if [[ -z $victim ]]; then
    echo "FAIL: $label: no engine rank found under mpirun"
    failures=$((failures + 1))
    return
  fi
  local start rc took
  start=$(date +%s)
  kill -9 "$victim"
  # Polled rather than a background watchdog: its sleep would hold the
  # test's output open for 40 s after the script ends, and meson waits.
  while kill -0 "$launcher" 2>/dev/null && (($(date +%s) - start < 40)); do sleep 0.2; done
  kill -9 "$launcher" 2>/dev/null
  wait "$launcher"
  rc=$?
  took=$(($(date +%s) - start))
  if [[ $rc -ne 0 && $took -le 30 ]]; then echo "ok: $label: mpirun exit $rc after ${took}s"; else
    echo "FAIL: $label: mpirun exit $rc after ${took}s"
    tail -5 "$tmp/dead.out"
    failures=$((failures + 1))
  fi
  no_leftovers "$tmp/dead.json"
}
killed_rank "killed rank" --grid 2,1,1,2
killed_rank "killed pipeline stage" --grid 1,1,1,2 --pipeline 2 --batch 8 --device paced

echo "$failures failure(s)"
[[ $failures -eq 0 ]]
