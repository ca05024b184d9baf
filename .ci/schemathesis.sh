#!/usr/bin/env bash
# Schemathesis over the OpenAPI document a served stratum answers: every
# check, positive and negative data, on the embedded default (SQLite).
# Installs schemathesis from PyPI into a virtual environment on first use.
# Usage: .ci/schemathesis.sh path/to/stratum
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:-target/debug/stratum}"
venv="${STRATUM_CI_VENV:-$PWD/target/ci-venv}"
if [ ! -x "$venv/bin/schemathesis" ]; then
    echo "ci: installing schemathesis into $venv" >&2
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q 'schemathesis==4.32.5'
fi

work="$(mktemp -d)"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
token="schemathesis-bootstrap-token-$(python3 -c 'import secrets; print(secrets.token_hex(16))')"
STRATUM_DATABASE_URL="sqlite://$work/stratum.db" STRATUM_LISTEN="127.0.0.1:$port" \
    STRATUM_BOOTSTRAP_TOKEN="$token" STRATUM_LOG=warn \
    "$bin" serve >"$work/serve.log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 1 100); do
    curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break
    sleep 0.1
done

"$venv/bin/schemathesis" --config-file .ci/schemathesis.toml run \
    "http://127.0.0.1:$port/v1/openapi.json" \
    --checks all --mode all --max-examples 20 \
    --phases examples,coverage,fuzzing,stateful \
    --header "Authorization: Bearer $token" \
    --generation-deterministic --no-color
