#!/usr/bin/env bash
# shellcheck disable=SC2317  # the step functions run through `step`, in a shell of their own
# The GPU acceptance (issue 48; docs/gpu.md, "The GPU acceptance"): every GPU check in one
# command, for a GPU machine that has no network and no container engine. From the
# repository root, as root:
#
#     tests/gpu/acceptance.sh OUTDIR
#
# 1. installs the runner's dependencies that machine lacks from .gpu-wheels/ (made beforehand
#    by tests/gpu/make_wheels.sh), and bubblewrap from the .deb there where bwrap is missing;
#    records `runner doctor`;
# 2. runs the GPU tests (python3 -m pytest tests/gpu);
# 3. `runner setup --engine host`, then the resnet9 smoke through the host engine (torch-cuda
#    and torch at batch 1), then `runner verify` of its result;
# 4. runs the entry's train.py alone on the same synthetic data, timed, for comparison;
# 5. prints and writes the figures and their targets (tests/gpu/acceptance_figures.py):
#    OUTDIR/figures.json and OUTDIR/figures.md.
#
# Every step has a time limit, within one budget (ACCEPTANCE_BUDGET_S, 450 s) so the whole
# ends within 8 minutes; each step's log is in OUTDIR even when it fails, and OUTDIR/steps.tsv
# has each step's exit status and seconds. Big files (the run's checkpoints, the data) stay in
# a work folder under /tmp (ACCEPTANCE_WORK); OUTDIR gets the result's small files (run/) and
# everything once more as OUTDIR/acceptance.tar.gz, for a harness that copies few files back.
#
# Exit status: 0 every step ran and every target was met; 1 a step failed; 2 the steps ran but
# a target was missed. The figures table is printed in every case.
set -uo pipefail

if [ $# -ne 1 ]; then
    echo "usage: tests/gpu/acceptance.sh OUTDIR" >&2
    exit 64
fi
if [ -e "$1" ] && [ -n "$(ls -A "$1")" ]; then
    echo "$1 is not empty: give a new or empty folder" >&2
    exit 64
fi
mkdir -p "$1" || exit 1
OUTDIR=$(cd "$1" && pwd)
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$REPO" || exit 1
ENTRY=entries/resnet9-v100
WHEELS=${ACCEPTANCE_WHEELS:-$REPO/.gpu-wheels}
WORK=${ACCEPTANCE_WORK:-$(mktemp -d /tmp/gpu-acceptance.XXXXXX)}
BUDGET_S=${ACCEPTANCE_BUDGET_S:-450}
RESERVE_S=15  # kept for the figures and the archive at the end
START_S=$SECONDS
RESULT_DIR=""
export OUTDIR REPO ENTRY WHEELS WORK RESULT_DIR

mkdir -p "$WORK" || exit 1
printf 'step\trc\tseconds\tnote\n' >"$OUTDIR/steps.tsv"
{
    echo "started $(date -u +%FT%TZ) on $(hostname)"
    echo "repository $REPO at $(git -C "$REPO" rev-parse HEAD 2>/dev/null || echo '?')"
    echo "work folder $WORK"
} >"$OUTDIR/acceptance.log"

note() { echo "$*" | tee -a "$OUTDIR/acceptance.log"; }

# step NAME LIMIT_S COMMAND...: run COMMAND (a program or a function of this script) under
# `timeout`, for the smaller of LIMIT_S and what the budget has left, its output in
# OUTDIR/NAME.log; its status goes to steps.tsv (judged by the figures script); never stops.
step() {
    local name=$1 limit=$2 left rc begin
    shift 2
    left=$((BUDGET_S - RESERVE_S - (SECONDS - START_S)))
    [ "$limit" -le "$left" ] || limit=$left
    if [ "$limit" -lt 5 ]; then
        note "$name: not run, the time budget (${BUDGET_S} s) is spent"
        printf '%s\t%s\t%s\t%s\n' "$name" 124 0 "not run: no time left" >>"$OUTDIR/steps.tsv"
        return 124
    fi
    note "$name: $* (limit ${limit} s)"
    begin=$(date +%s.%N)
    if declare -F "$1" >/dev/null; then  # a function: a shell of its own that timeout can stop
        timeout -k 5 "$limit" bash -c "set -uo pipefail; $(declare -f "$1"); $1" >"$OUTDIR/$name.log" 2>&1
    else
        timeout -k 5 "$limit" "$@" >"$OUTDIR/$name.log" 2>&1
    fi
    rc=$?
    local took
    took=$(python3 -c "import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 3))" "$begin" "$(date +%s.%N)")
    local why=""
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        why="timed out after ${limit} s"
    fi
    printf '%s\t%s\t%s\t%s\n' "$name" "$rc" "$took" "$why" >>"$OUTDIR/steps.tsv"
    note "$name: exit $rc in ${took} s${why:+ ($why)}"
    return "$rc"
}

# --- 1. the runner's dependencies, bubblewrap, doctor ------------------------------------------
install_wheels() {
    shopt -s nullglob
    local wheels=("$WHEELS"/*.whl)
    if [ ${#wheels[@]} -eq 0 ]; then
        echo "no wheels in $WHEELS (make them with tests/gpu/make_wheels.sh on a machine with the index)"
        return 1
    fi
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target "$WORK/site" "${wheels[@]}"
}
step install 60 install_wheels
export PYTHONPATH="$WORK/site:$REPO${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
export RUNNER_HOME="$WORK/home" RUNNER_RESULTS="$WORK/results"

unpack_bwrap() {
    shopt -s nullglob
    local debs=("$WHEELS"/bubblewrap_*.deb)
    [ ${#debs[@]} -gt 0 ] || { echo "bwrap is not installed and $WHEELS has no bubblewrap .deb"; return 1; }
    dpkg -x "${debs[0]}" "$WORK/bubblewrap" && echo "unpacked ${debs[0]} into $WORK/bubblewrap"
}
if ! command -v bwrap >/dev/null; then
    step bubblewrap 30 unpack_bwrap
    export PATH="$WORK/bubblewrap/usr/bin:$PATH"
fi
# What this host offers (recorded only: the runner decides), each look bounded in time.
{
    command -v bwrap && bwrap --version
    if timeout 20 bwrap --unshare-all --die-with-parent --ro-bind / / --proc /proc --dev /dev true; then
        echo "bwrap namespaces: yes"
    else
        echo "bwrap namespaces: no"
    fi
    timeout 20 nvidia-smi -L
    timeout 60 python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"
    timeout 30 python3 -m runner --help >/dev/null && echo "python3 -m runner: importable"
} >"$OUTDIR/host.log" 2>&1
RUNNER_ENGINE=host timeout 30 python3 -m runner doctor >"$OUTDIR/doctor.log" 2>&1
echo "exit $?" >>"$OUTDIR/doctor.log"  # recorded, not judged: Docker's rows are missing there

# --- 2. the GPU tests --------------------------------------------------------------------------
step pytest 120 python3 -m pytest tests/gpu -q -rs -p no:cacheprovider

# --- 3. setup, the smoke through the host engine, verify ----------------------------------------
# attempt NAME LIMIT_S COMMAND...: the step, retried (as NAME-retry1, NAME-retry2) with
# --unsandboxed where the runner refused because bubblewrap cannot work here, and with
# --allow-hardware-mismatch where it refused the host for the profile (a smoke run never
# conforms anyway). The flags used are in OUTDIR/flags.txt.
FLAGS=()
attempt() {
    local name=$1 limit=$2 try=0 log
    shift 2
    while true; do
        log=$name && [ "$try" -eq 0 ] || log=$name-retry$try
        step "$log" "$limit" "$@" ${FLAGS[@]+"${FLAGS[@]}"} && return 0
        if [[ " ${FLAGS[*]-} " != *" --unsandboxed "* ]] \
                && grep -qiE 'bubblewrap|bwrap|unsandboxed' "$OUTDIR/$log.log"; then
            FLAGS+=(--unsandboxed)
        elif [ "$name" = reproduce ] && [[ " ${FLAGS[*]-} " != *" --allow-hardware-mismatch "* ]] \
                && grep -q -- '--allow-hardware-mismatch' "$OUTDIR/$log.log"; then
            FLAGS+=(--allow-hardware-mismatch)
        else
            return 1
        fi
        try=$((try + 1))
    done
}
attempt setup 45 python3 -m runner setup --engine host
# --no-loadgen: the runner's LoadGen site is the harness lock's CPython 3.11 wheel, fetched on
# first use; this host has no index and another Python. The per-item pass (the p50) stays.
attempt reproduce 200 python3 -m runner reproduce "$ENTRY" --engine host --smoke --backend torch-cuda \
    --backend torch --seed 1 --no-loadgen
echo "${FLAGS[*]-}" >"$OUTDIR/flags.txt"
if [[ " ${FLAGS[*]-} " == *" --unsandboxed "* ]]; then
    echo unsandboxed >"$OUTDIR/sandbox.txt"
else
    echo sandboxed >"$OUTDIR/sandbox.txt"
fi

# The run folder just made: the newest result.json under the entry's results (smoke runs are
# kept in a folder of their own), in a results folder that is this script's alone.
RESULT_DIR=$(find "$RUNNER_RESULTS/resnet9-v100" -maxdepth 3 -name result.json -printf '%T@ %h\n' 2>/dev/null \
             | sort -n | tail -1 | cut -d' ' -f2-)
mkdir -p "$OUTDIR/run"
if [ -n "$RESULT_DIR" ]; then
    echo "$RESULT_DIR" >"$OUTDIR/run/folder.txt"
    for f in result.json events.jsonl plan.json fingerprint.json curve.tsv energy.tsv; do
        [ -f "$RESULT_DIR/$f" ] && cp "$RESULT_DIR/$f" "$OUTDIR/run/"
    done
    [ -d "$RESULT_DIR/logs" ] && cp -r "$RESULT_DIR/logs" "$OUTDIR/run/logs"
    # The smoke model misses the accuracy gate, so its record claims no latency: the figures
    # take the p50 from the per-item timings (acceptance_figures.measured_latency).
    if [ -f "$RESULT_DIR/inference/torch-cuda/latencies_ns.npy" ]; then
        mkdir -p "$OUTDIR/run/inference/torch-cuda"
        cp "$RESULT_DIR/inference/torch-cuda/latencies_ns.npy" "$OUTDIR/run/inference/torch-cuda/"
    fi
    step verify 45 python3 -m runner verify "$RESULT_DIR"  # 3: verified, does not count (what passes here)
else
    note "verify: no run folder under $RUNNER_RESULTS/resnet9-v100: nothing to verify"
    printf 'verify\t1\t0\tno run folder\n' >>"$OUTDIR/steps.tsv"
fi
export RESULT_DIR

# --- 4. train.py alone on the same data ----------------------------------------------------------
# The smoke data are the runner's own (runner.data.synthetic.smoke_data: seed 0, always the
# same); the initial weights those the runner drew for the run (its init/), else a loader that
# keeps the model's own. The run contract's paths (/data/train, /output, /scratch, /init,
# /entry) are made with bubblewrap's mount namespace where it works (no other isolation: this
# is the plain run), else the contract's variables point at the host's folders.
alone() {
    local data out="$WORK/alone/output" scratch="$WORK/alone/scratch" init threads mode
    threads=$(nproc)
    rm -rf "$WORK/alone" && mkdir -p "$out" "$scratch" || return 1
    data=$(python3 -c "import sys; from pathlib import Path; from runner.data.synthetic import smoke_data
print(smoke_data('cifar10', Path(sys.argv[1])).train_dir)" "$WORK/alone/data") || return 1
    if [ -n "$RESULT_DIR" ] && [ -f "$RESULT_DIR/init/runner_init.py" ]; then
        init="$RESULT_DIR/init"
    else
        init="$WORK/alone/init" && mkdir -p "$init"
        printf 'def load(model):\n    """No draw to load: the model keeps its own weights."""\n' >"$init/runner_init.py"
    fi
    if [ -n "$RESULT_DIR" ] && [ -f "$RESULT_DIR/plan.json" ]; then
        threads=$(python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['limits']['threads'])" \
                  "$RESULT_DIR/plan.json" 2>/dev/null || nproc)
    fi
    local env=(RUNNER_TASK=cifar10 RUNNER_SEED=1 RUNNER_THREADS="$threads" RUNNER_THRESHOLD=0.94 RUNNER_SMOKE=1
               PATH="$PATH" ${LD_LIBRARY_PATH:+LD_LIBRARY_PATH="$LD_LIBRARY_PATH"})
    local sandbox=(bwrap --die-with-parent --dev-bind /dev /dev --proc /proc --tmpfs /tmp)
    local top
    for top in /*; do
        case ${top#/} in proc | dev | tmp | data | output | scratch | init | entry) continue ;; esac
        if [ -L "$top" ]; then
            sandbox+=(--symlink "$(readlink "$top")" "$top")
        elif [ -d "$top" ]; then
            sandbox+=(--ro-bind "$top" "$top")
        fi
    done
    sandbox+=(--ro-bind "$data" /data/train --bind "$out" /output --bind "$scratch" /scratch
              --ro-bind "$init" /init --ro-bind "$REPO/$ENTRY" /entry --chdir /scratch)
    if "${sandbox[@]}" true 2>/dev/null; then
        mode="bwrap"
        env+=(RUNNER_DATA=/data RUNNER_OUTPUT=/output RUNNER_INIT=/init HOME=/scratch)
        set -- "${sandbox[@]}" env -i "${env[@]}" python3 /entry/train.py
    else
        mode="env"
        mkdir -p "$WORK/alone/run" && ln -sfn "$data" "$WORK/alone/run/train"
        env+=(RUNNER_DATA="$WORK/alone/run" RUNNER_OUTPUT="$out" RUNNER_INIT="$init" HOME="$scratch")
        set -- env -i "${env[@]}" python3 "$REPO/$ENTRY/train.py"
    fi
    echo "mode $mode, init $init, threads $threads: $*"
    local begin end rc
    begin=$(date +%s.%N)
    "$@" >"$OUTDIR/alone-train.log" 2>&1
    rc=$?
    end=$(date +%s.%N)
    python3 - "$begin" "$end" "$rc" "$mode" "$init" "$threads" "$out" >"$OUTDIR/alone.json" <<'EOF'
import json, sys
from pathlib import Path
begin, end, rc, mode, init, threads, out = sys.argv[1:]
print(json.dumps({"seconds": round(float(end) - float(begin), 3), "rc": int(rc), "mode": mode, "init": init,
                  "threads": int(threads), "final_model": (Path(out) / "model" / "weights.pt").is_file()}, indent=1))
EOF
    cat "$OUTDIR/alone.json"
    return "$rc"
}
step alone 60 alone

# --- 5. the figures --------------------------------------------------------------------------------
note "steps done in $((SECONDS - START_S)) s"
python3 tests/gpu/acceptance_figures.py "$OUTDIR"  # its status: 0, 1 (a step failed) or 2 (a target missed)
figures_rc=$?
tar -czf "$WORK/acceptance.tar.gz" -C "$OUTDIR" . && mv "$WORK/acceptance.tar.gz" "$OUTDIR/"
exit "$figures_rc"
