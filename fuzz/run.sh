#!/usr/bin/env bash
# Runs every fuzz target for SECONDS (default 30) from the committed seeds
# and prints one line per target: runs, corpus, and whether it crashed.
#   fuzz/run.sh 600    # the 10-minute runs docs/fuzzing.md records
# Needs a nightly toolchain and cargo-fuzz (installed when missing).
set -euo pipefail
cd "$(dirname "$0")"
seconds="${1:-30}"
# AddressSanitizer by default; FUZZ_SANITIZER=none builds far faster (CI's
# short run: the fuzzed code forbids `unsafe`, and the long runs keep it).
sanitizer="${FUZZ_SANITIZER:-address}"
targets=(stored_decode export_verify policy_document release_manifest request_bodies)

if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    echo "fuzz: no nightly toolchain here; the fuzz targets were not run" >&2
    exit 0
fi
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked --quiet

# The stored-decode corpus: each golden payload behind the byte that picks
# its (type, version) in STORED_VERSIONS, which lists them sorted.
mkdir -p corpus/stored_decode
i=0
for f in $(ls ../replay-tests/fixtures/events | sort -t. -k1,1 -k2,2V); do
    { printf "\\x$(printf %02x $i)"; cat "../replay-tests/fixtures/events/$f"; } > "corpus/stored_decode/seed-$f"
    i=$((i + 1))
done

cargo +nightly fuzz build -O --sanitizer "$sanitizer" >/dev/null 2>&1 ||
    cargo +nightly fuzz build -O --sanitizer "$sanitizer"
status=0
for t in "${targets[@]}"; do
    mkdir -p "corpus/$t" "artifacts/$t"
    seeds=()
    [ -d "seeds/$t" ] && seeds=("seeds/$t")
    log="artifacts/$t.log"
    if cargo +nightly fuzz run -O --sanitizer "$sanitizer" "$t" "corpus/$t" "${seeds[@]}" -- \
        -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=2048 \
        -artifact_prefix="artifacts/$t/" >"$log" 2>&1; then
        verdict="no crash"
    else
        verdict="CRASH (see fuzz/artifacts/$t/)"
        status=1
    fi
    runs=$(grep -Eo "Done [0-9]+ runs" "$log" | grep -Eo "[0-9]+" | tail -n1)
    echo "fuzz: $t: ${runs:-0} runs in ${seconds}s, corpus $(ls "corpus/$t" | wc -l) inputs, $verdict"
done
exit $status
