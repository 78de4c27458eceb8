#!/usr/bin/env bash
# The demo: a local container (Debian 12 + systemd, no GPU) taken to a serving, verified endpoint by
# deploy_k26.yml, with the SGLang simulator in place of SGLang. Ends with a curl you can run.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/container.sh k26-demo -p 127.0.0.1:30000:30000
.venv/bin/ansible-playbook -i inventories/demo deploy_k26.yml "$@"
key_file=inventories/demo/.secrets/api_key
echo
echo "The demo endpoint is up (simulator). Try:"
echo "  curl -s -H \"Authorization: Bearer \$(cat $key_file)\" http://127.0.0.1:30000/v1/models"
echo "  curl -s -H \"Authorization: Bearer \$(cat $key_file)\" -H 'Content-Type: application/json' \\"
echo "       -d '{\"model\": \"kimi-k2.6\", \"messages\": [{\"role\": \"user\", \"content\": \"Hello\"}]}' http://127.0.0.1:30000/v1/chat/completions"
echo "Stop it with: podman rm -f k26-demo"
