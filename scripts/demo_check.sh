#!/usr/bin/env bash
# `make demo` as the README tells a newcomer, then the curls it prints, from this machine through the published port.
# A demo container that was not there before is removed afterwards; one that was (a developer's) is left running.
set -euo pipefail
cd "$(dirname "$0")/.."
existed=$(podman container exists k26-demo && echo yes || echo no)
cleanup() { [ "$existed" = yes ] || podman rm -f -t 0 k26-demo >/dev/null 2>&1 || true; }
trap cleanup EXIT
make demo
key=$(cat inventories/demo/.secrets/api_key)
models=$(curl -s -H "Authorization: Bearer $key" http://127.0.0.1:30000/v1/models)
echo "GET /v1/models -> $models"
grep -q '"id": *"kimi-k2.6"' <<<"$models"
chat=$(curl -s -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
  -d '{"model": "kimi-k2.6", "messages": [{"role": "user", "content": "Hello"}]}' http://127.0.0.1:30000/v1/chat/completions)
echo "POST /v1/chat/completions -> ${chat:0:300}"
grep -q '"content"' <<<"$chat"
[ "$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:30000/v1/models)" = 401 ]
echo "the demo answers on 127.0.0.1:30000 from this machine, and refuses a request without the key"
