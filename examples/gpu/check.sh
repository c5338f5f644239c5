#!/usr/bin/env bash
# check.sh — the engine's cuda backend on one GPU, in one command: its tests,
# the benchmark runs engine/README.md reports, and a profile of this GPU.
#
#   examples/gpu/check.sh OUT_DIR
#   BUILD=/path/to/build STEPS=6 examples/gpu/check.sh /tmp/gpu
#
# 1. engine_cuda_kernels: every kernel against its cpu twin;
# 2. engine_cuda_backend on one rank: the glue, and three training steps of a
#    small model on the GPU against the cpu device (fp64 to 1e-10, fp32 loss
#    to 1e-5, bf16 loss to 1e-2);
# 3. engine --device cuda --bench: gpt-small (4,096 tokens a step), gpt-small
#    with --offload, and gpt-1.3b (micro-batch 1, batch 2; micro-batch 4,
#    batch 8), fp32, then gpt-small (with and without --offload) and gpt-1.3b
#    at micro-batch 4 in bf16 (and with --offload), each writing its record
#    to OUT_DIR/<run>.json;
# 4. measure --backend nccl on this one GPU: its GEMMs (cuBLAS bf16, the
#    grid and gpt-1.3b's shapes), the engine's own kernels timed alone
#    (flash attention, memory-bound kernels, a launch), memory and host
#    link, the links from --base (BASE, default dgx-h100), into
#    OUT_DIR/profile.json, for `advisor predict --machine
#    OUT_DIR/profile.json --fusion engine` with the runs' flags.
#
# One GPU, one rank: each binary starts as an MPI singleton (no mpirun;
# NCCL refuses two ranks on one GPU, so the two-rank test is not run here:
# `meson test engine-cuda-backend-2` on a node with two GPUs). Without a GPU
# it exits 77 at once. Each step has a time limit (LIMIT_* in seconds) and
# a failed step does not stop the ones after it; the exit status is the
# number of failed steps. A summary table ends the output.
set -u
out=${1:?usage: check.sh OUT_DIR}
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD:-$root/build}
case $build in /*) ;; *) build=$root/$build ;; esac
steps=${STEPS:-6}
mkdir -p "$out" || exit 2
cd "$root" || exit 2

if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "check.sh: no GPU here (nvidia-smi -L failed): skipped" >&2
  exit 77
fi
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$out/gpu.csv"

failed=0
summary=()
# run NAME LIMIT_S COMMAND...: output to OUT_DIR/NAME.log and the terminal.
run() {
  local name=$1 limit=$2
  shift 2
  echo "== $name: $*" >&2
  local t0=$SECONDS
  timeout --kill-after=10 "$limit" "$@" > >(tee "$out/$name.log") 2>&1
  local rc=$?
  local took=$((SECONDS - t0))
  [ $rc -eq 0 ] || failed=$((failed + 1))
  summary+=("$(printf '%-22s rc %-4s %4d s' "$name" "$rc" "$took")")
  return $rc
}

export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-$(nproc)}
if [ "${KERNEL_TESTS:-1}" != 0 ]; then
run kernels "${LIMIT_KERNELS:-90}" "$build/tests/engine/engine_cuda_kernels" --no-intro --force-colors=false
run backend "${LIMIT_BACKEND:-150}" "$build/tests/engine/engine_cuda_backend" --ranks 1 --no-intro --force-colors=false
fi

# The benchmark runs: name, limit, then the engine's flags. With OLD set to
# another engine binary (the commit before a change, built for this GPU),
# each runs with it too, as old-NAME, in the same job on the same GPU (OLD_ONLY:
# only those names). ONLY (names, space-separated) keeps those runs alone;
# KERNEL_TESTS=0 skips 1-2, PROFILE=0 skips 4. PROFILED (names) runs those
# again with --profile-kernels, as prof-NAME: time per kernel class.
small=(--model examples/models/gpt-small.json --micro-batch 16 --batch 16 --steps "$steps")
large=(--model examples/models/gpt-1.3b.json --steps "${STEPS_LARGE:-4}")
bench() {
  local name=$1 limit=$2
  shift 2
  case " ${ONLY:-$name} " in *" $name "*) ;; *) return 0 ;; esac
  run "$name" "$limit" "$build/engine/engine" --device cuda "$@" --bench --data synthetic --record "$out/$name.json"
  case " ${PROFILED:-} " in *" $name "*)
    run "prof-$name" "$limit" "$build/engine/engine" --device cuda "$@" --bench --profile-kernels --data synthetic \
      --record "$out/prof-$name.json" ;;
  esac
  [ -n "${OLD:-}" ] || return 0
  case " ${OLD_ONLY:-$name} " in *" $name "*) ;; *) return 0 ;; esac
  run "old-$name" "$limit" "$OLD" --device cuda "$@" --bench --data synthetic --record "$out/old-$name.json"
}
bench gpt-small "${LIMIT_SMALL:-60}" "${small[@]}"
bench gpt-small-offload "${LIMIT_SMALL:-60}" "${small[@]}" --offload
bench gpt-1.3b "${LIMIT_LARGE:-150}" "${large[@]}" --micro-batch 1 --batch 2
bench gpt-1.3b-mb4 "${LIMIT_LARGE:-150}" "${large[@]}" --micro-batch 4 --batch 8
bench gpt-small-bf16 "${LIMIT_SMALL:-60}" "${small[@]}" --dtype bf16
bench gpt-small-offload-bf16 "${LIMIT_SMALL:-60}" "${small[@]}" --offload --dtype bf16
bench gpt-1.3b-mb4-bf16 "${LIMIT_LARGE:-150}" "${large[@]}" --micro-batch 4 --batch 8 --dtype bf16
bench gpt-1.3b-mb4-offload-bf16 "${LIMIT_LARGE:-150}" "${large[@]}" --micro-batch 4 --batch 8 --offload --dtype bf16
[ "${PROFILE:-1}" = 0 ] || run profile "${LIMIT_PROFILE:-150}" "$build/measure/measure" --backend nccl --base "${BASE:-dgx-h100}" \
  --model examples/models/gpt-1.3b.json --micro-batch 4 --gemm-grids 1x1 --out "$out/profile.json" \
  --raw "$out/profile-raw.json"

echo
printf '%s\n' "${summary[@]}"
exit $failed
