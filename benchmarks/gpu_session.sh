#!/usr/bin/env bash
# Every GPU check in one go on a GPU machine (about 9 minutes):
#   1. a network-alone reference ($REF, if there: a hand-written SegNet loop, compiled,
#      channels-last, bf16) and `python -m segnet.bench trainer=gpu 'run=[camvid_full]'`
#      back to back, each alone on the GPU, with the profiler's table of each training step;
#   2. `images_gpu` on membrane and on horses, side by side on the one GPU, for the
#      minutes left (train_minutes), while
#   3. the smoke runs go one after another beside them: the GPU tests, `trainer=ddp
#      trainer.devices=1`, the parallel launcher with two folds, and `make train`'s GPU
#      branch (stopped once it trains).
# From the project root, with the data in one folder ($DATA: CamVid/, Task04_Hippocampus/,
# membrane/, horses/):
#   DATA=/data OUT=/tmp/gpu_out bash benchmarks/gpu_session.sh
# (this project's lent GPU machines: ../shared/tools/device-kit.sh here, then
# `source .device/setup.sh && bash benchmarks/gpu_session.sh` there.)
# Logs go to $OUT: session.log, the reference's and the bench's output and profiles, and
# runs.tgz with every run's train.log and metrics.json.
# END (seconds from the start, default 510) is when the image runs must be done.
set -u
OUT=${OUT:-/tmp/gpu_out}
DATA=${DATA:-/tmp/data}
REF=${REF:-.device/ref_gpu.py}
END=${END:-510}
WORK=/tmp/gpu_runs
mkdir -p "$OUT" "$WORK"
PY=$(command -v python3)
say() { echo "[$(date +%T) +${SECONDS}s] $*" | tee -a "$OUT/session.log"; }
# a smoke run's time limit: N seconds, or what is left until a minute after END (at least 10)
cap() { local left=$((END + 60 - SECONDS)); left=$((left > 10 ? left : 10)); echo $(($1 < left ? $1 : left)); }

say "gpu: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader)"
"$PY" -c "import torch, lightning; print('torch', torch.__version__, 'lightning', lightning.__version__, torch.cuda.get_device_name())" 2>&1 | tee -a "$OUT/session.log"
git log --oneline -1 2>/dev/null | tee -a "$OUT/session.log"

# 1. the reference and the pipeline, each alone
if [ -f "$REF" ]; then
  say "reference: compile channels_last, training only"
  REF_VARIANTS="compile channels_last" REF_INFER=0 REF_PROFILE="$OUT/ref_profile.txt" \
    timeout 150 "$PY" "$REF" 12 2>&1 | grep -v Warning | tee "$OUT/ref.txt"
else
  say "reference: $REF not found, skipped"
fi
say "bench: camvid_full"
timeout 260 "$PY" -m segnet.bench trainer=gpu 'run=[camvid_full]' repeats=1 epochs=2 profile=5 \
  paths.data_dir="$DATA" paths.output_dir="$WORK/bench" > "$WORK/bench.out" 2>&1
grep -v -i warn "$WORK/bench.out" | tail -25 | tee "$OUT/bench.txt"
cp "$WORK/bench/profile_camvid_full.txt" "$OUT/" 2>/dev/null

# 2. images_gpu on two folders side by side, for the minutes left
left=$((END - SECONDS - 75))  # start-up, the test and the write-up after training
minutes=$("$PY" -c "print(max(1.0, round($left / 60, 1)))")
say "images_gpu on membrane and horses, side by side, train_minutes=$minutes"
"$PY" train.py experiment=images_gpu data.root="$DATA"/membrane \
  'data.class_names=[cell,membrane]' 'data.label_values=[255,0]' train_minutes="$minutes" \
  paths.output_dir="$WORK/membrane" > "$WORK/membrane.out" 2>&1 &
membrane=$!
"$PY" train.py experiment=images_gpu data.root="$DATA"/horses \
  'data.class_names=[background,horse]' 'data.label_values=[0,255]' train_minutes="$minutes" \
  paths.output_dir="$WORK/horses" > "$WORK/horses.out" 2>&1 &
horses=$!

# 3. the smoke runs, one after another, beside the image runs
smokes() {
  local short=(trainer.max_epochs=2 trainer.check_val_every_n_epoch=1
    ++trainer.limit_train_batches=5 ++trainer.limit_val_batches=2)
  say "smoke: pytest tests/test_gpu.py"
  timeout "$(cap 150)" "$PY" -m pytest -q -p no:cacheprovider tests/test_gpu.py > "$WORK/test_gpu.out" 2>&1
  say "smoke: test_gpu exit $? ($(tail -1 "$WORK/test_gpu.out"))"
  say "smoke: trainer=ddp trainer.devices=1"
  timeout "$(cap 120)" "$PY" train.py experiment=hippocampus_gpu trainer=ddp trainer.devices=1 \
    data.root="$DATA"/Task04_Hippocampus "${short[@]}" paths.output_dir="$WORK/ddp" \
    > "$WORK/ddp.out" 2>&1
  say "smoke: ddp exit $?"
  say "smoke: parallel launcher, two folds"
  timeout "$(cap 150)" "$PY" train.py -m hydra/launcher=parallel experiment=hippocampus_gpu \
    data.root="$DATA"/Task04_Hippocampus 'data.fold=0,1' "${short[@]}" \
    hydra.sweep.dir="$WORK/folds" > "$WORK/folds.out" 2>&1
  say "smoke: launcher exit $?"
  say "smoke: make train (no ARGS), stopped once it trains"
  local linked=
  [ -e data/CamVid ] || { ln -s "$DATA/CamVid" data/CamVid && linked=1; }  # make train's CamVid
  touch /tmp/make-stamp
  setsid make train BIN="$(dirname "$PY")" STAMP=/tmp/make-stamp > "$WORK/make_train.out" 2>&1 &
  local make_pid=$! t=0
  until grep -q -E "start-up:" "$WORK/make_train.out" 2>/dev/null \
    || [ $t -ge "$(cap 120)" ] || ! kill -0 $make_pid 2>/dev/null; do sleep 5; t=$((t + 5)); done
  kill -TERM -- -$make_pid 2>/dev/null; sleep 3; kill -KILL -- -$make_pid 2>/dev/null
  cp -r outputs "$WORK/make_train_outputs" 2>/dev/null
  [ -n "$linked" ] && rm data/CamVid
  say "smoke: make train stopped after ${t}s: $(grep -m1 'make train:' "$WORK/make_train.out")"
}
smokes &
smoke_pid=$!

wait $membrane; say "membrane exit $?"
wait $horses; say "horses exit $?"
wait $smoke_pid

# what came out, in the reply's tail and in runs.tgz
for run in membrane horses; do
  say "$run: $(grep -h -E 'plan for|batch plan|an epoch:' "$WORK/$run/train.log" | cut -c1-300)"
  say "$run: $(grep -h -i -E 'budget|minutes' "$WORK/$run/train.log" | tail -3 | cut -c1-300)"
  "$PY" - "$WORK/$run/metrics.json" <<'PY' 2>&1 | tee -a "$OUT/session.log"
import json, sys
m = json.load(open(sys.argv[1]))
keep = {k: round(v, 4) for k, v in m["metrics"].items()
        if k.startswith(("test/", "time/")) or k == "val/dice"}
print(sys.argv[1], "epochs", m["epochs_trained"], "best epoch", m["best_epoch"], keep)
PY
done
for smoke in test_gpu ddp folds make_train; do
  say "$smoke: $(grep -v -i warn "$WORK/$smoke.out" | tail -3 | tr '\n' ' ' | cut -c1-400)"
done
tar czf "$OUT/runs.tgz" -C "$WORK" --exclude='*.ckpt' --exclude='*.pt' --exclude='*.onnx' .
say "done"
