#!/bin/sh
# Builds tlog-verify and its self test (GOPATH mode, no network) and runs the
# self test, which serves in-memory logs and checks that the verifier accepts
# good ones and rejects tampered ones.
set -eu
cd "$(dirname "$0")"
export GO111MODULE=off GOFLAGS=
export GOPATH="/usr/share/gocode${GOPATH:+:$GOPATH}"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

test -z "$(gofmt -l . selftest)" || { echo "not gofmt'ed:"; gofmt -l . selftest; exit 1; }
go vet . ./selftest
go build -o "$out/tlog-verify" .
go build -o "$out/selftest" ./selftest
"$out/selftest" "$out/tlog-verify"
