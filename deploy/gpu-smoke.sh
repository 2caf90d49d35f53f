#!/usr/bin/env bash
# The first run on a GPU host, in order: doctor, one replica alone, the stack on one GPU, one
# translation through Nginx, status. Stops at the first step that fails and says which.
# Usage: deploy/gpu-smoke.sh [MODEL] (default: the default hub model; a local path works offline).
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${BIN:-.venv/bin}
MODEL=${1:-tencent/Hunyuan-MT-7B}
GPU=${GPU:-0}
PORT=${PORT:-18080}
REPLICA_PORT=${REPLICA_PORT:-18001}
RUN_DIR=${RUN_DIR:-$(mktemp -d /tmp/hunyuan-smoke.XXXXXX)}
# First start includes loading ~15 GB of weights and graph capture.
START_TIMEOUT_S=${START_TIMEOUT_S:-1200}
pids=()

step() { echo; echo "== $*"; }
fail() { echo "gpu-smoke: FAILED at: $*  (logs in $RUN_DIR)" >&2; exit 1; }
cleanup() { for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT

# wait_health URL: until /health answers 200, within START_TIMEOUT_S.
wait_health() {
  local deadline=$((SECONDS + START_TIMEOUT_S))
  until curl -fsS "$1" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || return 1
    sleep 5
  done
}

translate() {
  curl -fsS "localhost:$1/translate" -H 'content-type: application/json' \
    -d '{"text": "Open file", "source_lang": "en", "target_lang": "zh"}'
}

step "doctor"
"$BIN/hunyuan-serve" doctor --model "$MODEL" --gpus "$GPU" --port "$PORT" || fail "doctor"

step "one replica on GPU $GPU (the model is downloaded once by up below if it is not cached)"
# Run up's download first so the replica alone does not race it: doctor checked the model is reachable.
"$BIN/python" -c "
from hunyuan_serve.config import EngineConfig
from hunyuan_serve.models import fetch_model
print(fetch_model(EngineConfig(), '$MODEL'))" >"$RUN_DIR/model-path" || fail "download"
CUDA_VISIBLE_DEVICES=$GPU CUDA_DEVICE_ORDER=PCI_BUS_ID VLLM_WORKER_MULTIPROC_METHOD=spawn \
  PYTORCH_NVML_BASED_CUDA_CHECK=1 "$BIN/hunyuan-serve" replica --device cuda \
  --model "$(cat "$RUN_DIR/model-path")" --served-model-name "$MODEL" --port "$REPLICA_PORT" \
  >"$RUN_DIR/replica.log" 2>&1 &
pids+=($!)
wait_health "localhost:$REPLICA_PORT/health" || fail "replica start (see $RUN_DIR/replica.log)"
translate "$REPLICA_PORT" || fail "replica translation"
cleanup
pids=()

step "the stack on GPU $GPU"
"$BIN/hunyuan-serve" up --model "$MODEL" --gpus "$GPU" --port "$PORT" --run-dir "$RUN_DIR/up" \
  >"$RUN_DIR/up.log" 2>&1 &
pids+=($!)
wait_health "localhost:$PORT/health" || fail "stack start (see $RUN_DIR/up.log and $RUN_DIR/up/logs)"

step "one translation through Nginx"
translate "$PORT" || fail "translation through nginx"

step "status"
"$BIN/hunyuan-serve" status --run-dir "$RUN_DIR/up" || fail "status"
echo
echo "gpu-smoke: all steps passed (logs in $RUN_DIR)"
