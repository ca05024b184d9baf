#!/usr/bin/env bash
# The API contract, against the built binary serving the embedded default
# (SQLite), each part on a fresh server:
# 1. schemathesis over the served OpenAPI document: every check, positive
#    and negative data, deterministic generation;
# 2. a client generated from the served document by openapi-python-client,
#    used as generated, drives the membership scenario.
# Both come from PyPI into a virtual environment on first use.
# Usage: .ci/contract.sh path/to/stratum
set -euo pipefail
cd "$(dirname "$0")/.."
bin="$(realpath "${1:-target/debug/stratum}")"
venv="${STRATUM_CI_VENV:-$PWD/target/ci-venv}"
if [ ! -x "$venv/bin/schemathesis" ] || [ ! -x "$venv/bin/openapi-python-client" ]; then
    echo "ci: installing schemathesis and openapi-python-client into $venv" >&2
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q 'schemathesis==4.32.5' 'openapi-python-client==0.29.1'
fi

work="$(mktemp -d)"
servers=()
cleanup() {
    for pid in "${servers[@]}"; do kill "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

# Starts a server on a fresh database; sets $url and $token.
start_server() {
    local name="$1" port
    port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    token="contract-bootstrap-token-$(python3 -c 'import secrets; print(secrets.token_hex(16))')"
    url="http://127.0.0.1:$port"
    mkdir -p "$work/$name"
    STRATUM_DATABASE_URL="sqlite://$work/$name/stratum.db" STRATUM_LISTEN="127.0.0.1:$port" \
        STRATUM_BOOTSTRAP_TOKEN="$token" STRATUM_LOG=warn \
        "$bin" serve >"$work/$name/serve.log" 2>&1 &
    servers+=("$!")
    for _ in $(seq 1 100); do
        curl -sf "$url/healthz" >/dev/null && return 0
        sleep 0.1
    done
    echo "ci: $name server did not start" >&2
    cat "$work/$name/serve.log" >&2
    return 1
}

start_server schemathesis
"$venv/bin/schemathesis" --config-file .ci/schemathesis.toml run \
    "$url/v1/openapi.json" \
    --checks all --mode all --max-examples 20 \
    --phases examples,coverage,fuzzing,stateful \
    --header "Authorization: Bearer $token" \
    --generation-deterministic --no-color

start_server client
curl -sf "$url/v1/openapi.json" >"$work/client/openapi.json"
(cd "$work/client" && "$venv/bin/openapi-python-client" generate \
    --path openapi.json --meta none --output-path client >/dev/null)
"$venv/bin/python" .ci/client_scenario.py "$url" "$token" "$work/client"
