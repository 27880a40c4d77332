#!/usr/bin/env bash
# Times PhantomWiki 1.0.3 (SWI-Prolog via pyswip) and `rulegym generate` side by side on the same
# configurations: question depth 16 (38 templates), trees of up to 10 people, depth 10, seed 1,
# easy mode unless the configuration says hard (all 45 relations). Wall time and peak RSS come from /usr/bin/time -f "%e %M"; rulegym's figure is the
# median of RULEGYM_RUNS runs, the peer's the median of PEER_RUNS runs. Every run's question count
# is checked, and (VERIFY=1) rulegym's rule base re-answers every question PhantomWiki generated
# (`rulegym phantomwiki verify`), so the larger universes are a compatibility check too.
#
# Installs the peer when missing: apt-get install swi-prolog-nox, a Python 3.12 venv, pip install
# phantom-wiki==1.0.3.
#
# Then (BATCH=N, N > 0) the many-universes comparison: N PhantomWiki runs with seeds 1..N (one
# process each, the only way PhantomWiki makes many universes) against one
# `rulegym generate --seeds 1..=N`, at BATCH_CONFIG; total wall, per-universe cost, peak RSS.
#
# Usage: scripts/compare-phantomwiki.sh
# Env:   CONFIGS="100:10 100:100 1000:100 100:10:hard 1000:10 1000:10:hard"
#        (trees:questions-per-template[:hard]), BATCH=100, BATCH_CONFIG=100:10, RULEGYM_RUNS=3,
#        PEER_RUNS=1, PW_VENV=/tmp/pwvenv, PYTHON312=/root/.pyenv/versions/3.12.1/bin/python,
#        WORK=/tmp/compare-phantomwiki, VERIFY=1, RULEGYM=path/to/rulegym (default: build it)
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CONFIGS="${CONFIGS:-100:10 100:100 1000:100 100:10:hard 1000:10 1000:10:hard}"
BATCH="${BATCH:-100}"
BATCH_CONFIG="${BATCH_CONFIG:-100:10}"
RULEGYM_RUNS="${RULEGYM_RUNS:-3}"
PEER_RUNS="${PEER_RUNS:-1}"
PW_VENV="${PW_VENV:-/tmp/pwvenv}"
PYTHON312="${PYTHON312:-/root/.pyenv/versions/3.12.1/bin/python}"
WORK="${WORK:-/tmp/compare-phantomwiki}"
VERIFY="${VERIFY:-1}"
TIME=/usr/bin/time

# --- the peer ---------------------------------------------------------------------------------
if ! command -v swipl >/dev/null; then
    apt-get install -y swi-prolog-nox >/dev/null
fi
if [ ! -x "$TIME" ]; then
    apt-get install -y time >/dev/null
fi
if ! "$PW_VENV/bin/python" -c 'import phantom_wiki' 2>/dev/null; then
    if [ ! -x "$PYTHON312" ]; then
        PYTHON312="$(command -v python3.12)"
    fi
    "$PYTHON312" -m venv "$PW_VENV"
    "$PW_VENV/bin/pip" install --quiet phantom-wiki==1.0.3
fi
PEER_VERSION="$("$PW_VENV/bin/pip" show phantom-wiki | awk '/^Version/ {print $2}')"
SWI_VERSION="$(swipl --version | awk '{print $3}')"

# --- rulegym ----------------------------------------------------------------------------------
if [ -z "${RULEGYM:-}" ]; then
    (cd "$ROOT" && cargo build --release --quiet)
    RULEGYM="$ROOT/target/release/rulegym"
fi

mkdir -p "$WORK"
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

# run LABEL OUTDIR CMD...: one timed run; appends "wall rss user sys" to $WORK/LABEL.times.
run() {
    local label="$1" out="$2"
    shift 2
    rm -rf "$out"
    "$TIME" -f "%e %M %U %S" -o "$WORK/time.tmp" "$@" >"$WORK/$label.log" 2>&1 || {
        echo "FAILED: $label (see $WORK/$label.log)" >&2
        exit 1
    }
    cat "$WORK/time.tmp" >>"$WORK/$label.times"
}

echo "## PhantomWiki $PEER_VERSION (SWI-Prolog $SWI_VERSION) vs rulegym $("$RULEGYM" --version | awk '{print $2}')"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); load average at start: $(loadavg)"
echo
echo "| trees | q/template | mode | people | questions (peer / rulegym) | peer wall s | rulegym wall s (median of $RULEGYM_RUNS) | wall ratio | peer / rulegym CPU s | peer peak MB | rulegym peak MB | load avg during | verify peer's questions |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
for config in $CONFIGS; do
    IFS=: read -r trees per mode <<<"$config"
    mode="${mode:-easy}"
    case "$mode" in
        easy) peer_mode=(--easy-mode); rg_mode=() ;;
        hard) peer_mode=(); rg_mode=(--hard-mode) ;;
        *) echo "unknown mode $mode in $config (easy or hard)" >&2; exit 2 ;;
    esac
    tag="t${trees}-q${per}-${mode}"
    rm -f "$WORK/peer-$tag.times" "$WORK/rulegym-$tag.times"
    load_before="$(loadavg | cut -d' ' -f1)"
    for _ in $(seq "$PEER_RUNS"); do
        run "peer-$tag" "$WORK/peer-$tag" "$PW_VENV/bin/python" -m phantom_wiki \
            -od "$WORK/peer-$tag" --seed 1 --question-depth 16 --num-family-trees "$trees" \
            --max-family-tree-size 10 --max-family-tree-depth 10 "${peer_mode[@]}" \
            --num-questions-per-type "$per" --article-format json --question-format json
    done
    for _ in $(seq "$RULEGYM_RUNS"); do
        run "rulegym-$tag" "$WORK/rulegym-$tag" "$RULEGYM" generate --out "$WORK/rulegym-$tag" \
            --seed 1 --num-family-trees "$trees" --per-template "$per" --depth 16 --quiet "${rg_mode[@]}"
    done
    load_after="$(loadavg | cut -d' ' -f1)"
    peer_q="$("$PW_VENV/bin/python" -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' "$WORK/peer-$tag/questions.json")"
    rg_q="$(wc -l <"$WORK/rulegym-$tag/questions.jsonl")"
    people="$(wc -l <"$WORK/rulegym-$tag/people.jsonl")"
    peer_people="$(grep -c '^type(' "$WORK/peer-$tag/facts.pl")"
    peer_wall="$(cut -d' ' -f1 "$WORK/peer-$tag.times" | median)"
    peer_kb="$(cut -d' ' -f2 "$WORK/peer-$tag.times" | median)"
    rg_wall="$(cut -d' ' -f1 "$WORK/rulegym-$tag.times" | median)"
    rg_kb="$(cut -d' ' -f2 "$WORK/rulegym-$tag.times" | median)"
    peer_cpu="$(awk '{print $3 + $4}' "$WORK/peer-$tag.times" | median)"
    rg_cpu="$(awk '{print $3 + $4}' "$WORK/rulegym-$tag.times" | median)"
    ratio="$(awk -v a="$peer_wall" -v b="$rg_wall" 'BEGIN {printf "%.1fx", a / b}')"
    verdict="-"
    if [ "$VERIFY" = 1 ]; then
        if "$RULEGYM" phantomwiki verify --compact "$WORK/peer-$tag" >"$WORK/verify-$tag.json" 2>"$WORK/verify-$tag.err"; then
            verdict="$("$PW_VENV/bin/python" -c 'import json,sys; r=json.load(open(sys.argv[1])); print("%d/%d agree" % (r["agree"], r["questions"]))' "$WORK/verify-$tag.json")"
        else
            verdict="FAILED: $(tail -1 "$WORK/verify-$tag.err")"
        fi
    fi
    printf '| %s | %s | %s | %s / %s | %s / %s | %s | %s | %s | %s / %s | %d | %d | %s -> %s | %s |\n' \
        "$trees" "$per" "$mode" "$peer_people" "$people" "$peer_q" "$rg_q" "$peer_wall" "$rg_wall" "$ratio" \
        "$peer_cpu" "$rg_cpu" \
        "$((peer_kb / 1024))" "$((rg_kb / 1024))" "$load_before" "$load_after" "$verdict"
done

# --- many universes ---------------------------------------------------------------------------
if [ "$BATCH" -gt 0 ]; then
    IFS=: read -r trees per _ <<<"$BATCH_CONFIG"
    echo
    echo "### $BATCH universes of $BATCH_CONFIG (trees:questions-per-template, easy mode), seeds 1..$BATCH"
    echo
    rm -f "$WORK/peer-batch.times" "$WORK/rulegym-batch.times"
    load_before="$(loadavg | cut -d' ' -f1)"
    peer_start=$(date +%s.%N)
    for seed in $(seq "$BATCH"); do
        run "peer-batch" "$WORK/peer-batch" "$PW_VENV/bin/python" -m phantom_wiki \
            -od "$WORK/peer-batch" --seed "$seed" --question-depth 16 --num-family-trees "$trees" \
            --max-family-tree-size 10 --max-family-tree-depth 10 --easy-mode \
            --num-questions-per-type "$per" --article-format json --question-format json
    done
    peer_total="$(awk -v s="$peer_start" -v e="$(date +%s.%N)" 'BEGIN {printf "%.1f", e - s}')"
    load_mid="$(loadavg | cut -d' ' -f1)"
    run "rulegym-batch" "$WORK/rulegym-batch" "$RULEGYM" generate --out "$WORK/rulegym-batch" \
        --seeds "1..=$BATCH" --num-family-trees "$trees" --per-template "$per" --depth 16 --quiet
    load_after="$(loadavg | cut -d' ' -f1)"
    rg_total="$(cut -d' ' -f1 "$WORK/rulegym-batch.times")"
    rg_cpu="$(awk '{print $3 + $4}' "$WORK/rulegym-batch.times")"
    rg_kb="$(cut -d' ' -f2 "$WORK/rulegym-batch.times")"
    peer_kb="$(cut -d' ' -f2 "$WORK/peer-batch.times" | sort -g | tail -1)"
    peer_cpu="$(awk '{s += $3 + $4} END {printf "%.1f", s}' "$WORK/peer-batch.times")"
    dirs="$(find "$WORK/rulegym-batch" -mindepth 1 -maxdepth 1 -type d -name 'seed-*' | wc -l)"
    rg_q="$(cat "$WORK"/rulegym-batch/seed-*/questions.jsonl | wc -l)"
    echo "| universes | peer total wall s | peer s per universe | rulegym total wall s | rulegym s per universe | wall ratio | peer / rulegym CPU s | peer peak MB (largest run) | rulegym peak MB (whole batch) | rulegym questions | load avg |"
    echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    printf '| %s | %s | %s | %s | %s | %s | %s / %s | %d | %d | %s | %s -> %s -> %s |\n' \
        "$dirs" "$peer_total" "$(awk -v t="$peer_total" -v n="$BATCH" 'BEGIN {printf "%.3f", t / n}')" \
        "$rg_total" "$(awk -v t="$rg_total" -v n="$BATCH" 'BEGIN {printf "%.4f", t / n}')" \
        "$(awk -v a="$peer_total" -v b="$rg_total" 'BEGIN {printf "%.1fx", a / b}')" \
        "$peer_cpu" "$rg_cpu" "$((peer_kb / 1024))" "$((rg_kb / 1024))" "$rg_q" \
        "$load_before" "$load_mid" "$load_after"
fi
echo
echo "all runs (wall s, peak KB, user s, sys s): $(for f in "$WORK"/*.times; do printf '%s: %s; ' "$(basename "$f" .times)" "$(tr '\n' ' ' <"$f")"; done)"
