#!/usr/bin/env bash
# One check of attnviz on a lent GPU machine (issues 36 and 20), run from the repository root:
#   1. the machine: nvidia-smi -L, python, torch, transformers; then whether a small random LLM decodes on the GPU
#      as on the CPU (device_parity.py: greedy, a head off, beam 3, a batch; the tokens and the largest differences);
#   2. issue 36: the decoder-only LLM benchmark on cuda at bfloat16, llama-3.2-1b then qwen2.5-0.5b (attnviz with
#      every attention map captured against transformers eager with output_attentions; bench_decode.py --large);
#   3. issue 20: bench_train.py's GPU part (float32 and bf16 autocast, one process);
#   4. only with the time left: the 6+6-layer d 512 German-English model trained on the GPU (stopped by SIGTERM
#      when its time is up: the best checkpoint so far is kept), its test bleu_tok beside the bundled model's.
# Every part runs under its own `timeout` inside one budget (GPU_CHECK_BUDGET seconds, 345 by default; with --tiny
# 780, and each part 4x its limit), so one failure or a slow part loses nothing before it. Each part's JSON lands
# in $OUT (./gpu-out when OUT is unset) and is printed; stderr goes to $OUT/log.txt (its end is printed when a part
# fails); $OUT/status.txt holds the machine's facts and each part's exit status and seconds; the training's own
# lines are big-train.txt: 8 files at most.
#
# The machine needs no spaCy and no network: the Multi30k files come pre-tokenized from the carried folder .gpu/data
# (bench_train.py --write-tokenized .gpu/data), read with whitespace tokenizers (the same tokens).
#
#   bash benchmarks/gpu_check.sh          # on the GPU machine
#   bash benchmarks/gpu_check.sh --tiny   # on a CPU: every part at toy size (tiny LLM shape, a few steps)
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
    TOKENIZERS_PARALLELISM=false HF_HUB_DISABLE_PROGRESS_BARS=1
export ATTNVIZ_BENCH_CACHE="${ATTNVIZ_BENCH_CACHE:-/tmp/attnviz-bench}"
OUT="${OUT:-$PWD/gpu-out}"
DATA="${GPU_CHECK_DATA:-$PWD/.gpu/data}"
PY="${PYTHON:-python3}"
WORK="${TMPDIR:-/tmp}/attnviz-gpu-check"
START=$SECONDS
TINY=0
[ "${1:-}" = "--tiny" ] && TINY=1
# --tiny checks that every part runs, not how fast: on a shared CPU each part may take 4x its GPU limit, within a
# budget that tests/test_benchmarks.py's own limit holds
SCALE=1
[ "$TINY" = 1 ] && SCALE=4
BUDGET="${GPU_CHECK_BUDGET:-$([ "$TINY" = 1 ] && echo 780 || echo 345)}"
rm -rf "$WORK"
mkdir -p "$OUT" "$WORK"
: > "$OUT/log.txt"
: > "$OUT/status.txt"

left() { echo $((BUDGET - (SECONDS - START))); }

# part FILE LIMIT MIN COMMAND...: COMMAND's stdout into $OUT/FILE, under `timeout` of LIMIT seconds or what is left
# of the budget; skipped when less than MIN seconds are left.
part() {
    local name=$1 limit=$(($2 * SCALE)) least=$3 rest rc begin
    shift 3
    rest=$(left)
    if [ "$rest" -lt "$least" ]; then
        echo "$name: skipped, $rest s left of the budget of $BUDGET s" | tee -a "$OUT/status.txt"
        return 0
    fi
    [ "$limit" -gt "$rest" ] && limit=$rest
    echo "== $name (at most $limit s): $*"
    echo "== $name: $*" >> "$OUT/log.txt"
    begin=$SECONDS
    timeout --kill-after=20 "$limit" "$@" > "$OUT/$name" 2> "$WORK/$name.err"
    rc=$?
    tr '\r' '\n' < "$WORK/$name.err" | grep -v '^\s*$' >> "$OUT/log.txt"
    echo "$name: exit $rc, $((SECONDS - begin)) s" | tee -a "$OUT/status.txt"
    case $name in  # a part's JSON whole; a log's last lines (progress lines would crowd the rest out of view)
        *.json) cat "$OUT/$name" ;;
        *) tr '\r' '\n' < "$OUT/$name" | grep -v '^\s*$' | tail -n 15 ;;
    esac
    if [ "$rc" -ne 0 ]; then
        echo "-- $name failed (exit $rc; 124: its time was up); the end of its stderr:"
        tr '\r' '\n' < "$WORK/$name.err" | grep -v '^\s*$' | tail -n 15
    fi
    return 0
}

machine() {
    (nvidia-smi -L || echo "nvidia-smi: none") 2>&1
    "$PY" - <<'EOF'
import json, platform
import torch, transformers
gpu = torch.cuda.is_available()
print(json.dumps({"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
                  "transformers": transformers.__version__, "gpu": torch.cuda.get_device_name(0) if gpu else None,
                  "gpu_memory_gib": round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1) if gpu
                  else None, "cpu_cores": __import__("os").cpu_count()}))
EOF
}

BIG=(--set src_tokenizer.mode=whitespace --set tgt_tokenizer.mode=whitespace --set train.average_last=0
     --set train.save_epochs=false)
if [ "$TINY" = 1 ]; then
    DEVICE=cpu SHAPES=(tiny) TOKENS=8 REPEATS=1 THREADS=1
    TRAIN=(--mode processes --processes 1 --steps 2)
    BIG+=(--set model.d_model=32 --set model.enc_layers=1 --set model.dec_layers=1 --set model.ff_dim=64
          --set model.heads=2 --epochs 1 --max-steps 2 --device cpu)
    BLEU_LIMIT=20
else
    DEVICE=cuda SHAPES=(llama-3.2-1b qwen2.5-0.5b) TOKENS=30 REPEATS=3 THREADS=8
    TRAIN=(--mode cuda --steps 30)
    BIG+=(--set model.d_model=512 --set model.enc_layers=6 --set model.dec_layers=6 --set model.ff_dim=2048
          --set model.heads=8 --set train.lr=5e-4 --epochs 8 --device cuda --precision bf16)
    # lr 5e-4: the preset's one-cycle peak of 2e-3 made this larger network diverge on an H200 (docs/benchmarks.md#gpu)
    BLEU_LIMIT=0
fi

echo "== machine"
machine 2>&1 | tee -a "$OUT/status.txt"
part parity.json 60 20 "$PY" benchmarks/device_parity.py --device auto
limits=(180 90)  # seconds: llama-3.2-1b's part, then qwen2.5-0.5b's
i=0
for shape in "${SHAPES[@]}"; do
    part "llm-$shape.json" "${limits[$i]}" 60 "$PY" benchmarks/bench_decode.py --large "$shape" --dtype bfloat16 \
        --device "$DEVICE" --tokens "$TOKENS" --repeats "$REPEATS" --threads "$THREADS"
    i=$((i + 1))
done
part train.json 90 30 env ATTNVIZ_DATA="$DATA" "$PY" benchmarks/bench_train.py --tokenized "${TRAIN[@]}"
# the larger model: training gets what is left but the BLEU's 45 s; SIGTERM makes it save and stop
rest=$(left)
part big-train.txt $((rest - 45)) 110 "$PY" -m attnviz train --preset multi30k-de-en-plus --data-dir "$DATA" \
    --out "$WORK/de-en-big.safetensors" "${BIG[@]}"
big="$WORK/de-en-big.safetensors"
[ -f "$big" ] || big="$WORK/de-en-big.last.safetensors"
if [ -f "$big" ]; then
    bundled=models/de-en-multi30k.safetensors
    [ -f "$bundled" ] || bundled=""  # (a working tree cut down to travel may lack it)
    part big-bleu.json 45 15 "$PY" benchmarks/gpu_bleu.py --data-dir "$DATA" --limit "$BLEU_LIMIT" "$big" $bundled
fi
echo "== done in $((SECONDS - START)) s of $BUDGET; results in $OUT:"
ls "$OUT"
