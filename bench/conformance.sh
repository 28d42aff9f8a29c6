#!/usr/bin/env bash
# kube-apiserver's API-machinery conformance specs (the anchor kit's conformance.sh) against
# kapiserver from this checkout, with the real kube-controller-manager as its controller manager
# and a Ready fake Node, all in a temporary directory (see docs/control-plane.md).
#
#   bench/conformance.sh [OUTDIR]                  # default OUTDIR: ./conformance-<date>
#   CONFORMANCE_FOCUS='Namespaces.*finalize' bench/conformance.sh /tmp/c1   # a few specs
#
# Knobs: STANDALONE=1 (kapiserver's own controllers, no kube-controller-manager), KEEP=1 (leave
# the temporary directory), PY (the interpreter with kapiserver installed; default .venv/bin/python),
# ETCD=http://127.0.0.1:2479 (kapiserver on that etcd, under a key prefix of its own; default SQLite).
# Prints conformance.sh's summary line; OUTDIR gets e2e.log, junit.xml, kapiserver.log, kcm.log.
# Skips (exit 0, with a message) when the anchor kit's binaries were not built.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ANCHORS_DIR=${ANCHORS_DIR:-$HOME/.cache/kube-anchor}
KIT=${ANCHOR_KIT:-/work/shared/anchor}
PY=${PY:-$ROOT/.venv/bin/python}
for need in "$ANCHORS_DIR/bin/e2e.test" "$ANCHORS_DIR/bin/kube-controller-manager" "$KIT/conformance.sh"; do
  if [ ! -e "$need" ]; then
    echo "SKIP: $need is absent (build it with the anchor kit, $KIT/README.md)"; exit 0
  fi
done
OUT=$(realpath -m "${1:-conformance-$(date +%Y%m%d-%H%M%S)}")
mkdir -p "$OUT"
T=$(mktemp -d /tmp/kap-conformance.XXXXXX)
pids=()
cleanup() {
  for ((i=${#pids[@]}-1; i>=0; i--)); do kill "${pids[i]}" 2>/dev/null; done
  [ -f "$T/anchor/run/node-heartbeat.pid" ] && kill "$(cat "$T/anchor/run/node-heartbeat.pid")" 2>/dev/null
  sleep 1
  cp "$T/server.log" "$OUT/kapiserver.log" 2>/dev/null
  cp "$T/kube-controller-manager.log" "$OUT/kcm.log" 2>/dev/null
  [ "${KEEP:-0}" = 1 ] && echo "kept $T" || rm -rf "$T"
}
trap cleanup EXIT

PORT=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
CONTROLLERS="controllers: {enabled: false}"
[ "${STANDALONE:-0}" = 1 ] && CONTROLLERS="controllers: {enabled: true}"
cat > "$T/apiserver.yaml" <<EOF
secure_port: $PORT
bind_address: 127.0.0.1
advertise_address: 192.0.2.10
cert_dir: $T/certs
data_dir: $T/data
admin_kubeconfig: $T/admin.kubeconfig
$CONTROLLERS
EOF
if [ -n "${ETCD:-}" ]; then
  printf 'storage:\n  backend: etcd3\n  etcd:\n    servers: [%s]\n    prefix: /kapiserver-conformance-%s\n' \
    "$ETCD" "$(basename "$T")" >> "$T/apiserver.yaml"
fi
(cd "$T" && PYTHONPATH="$ROOT" exec "$PY" -c \
  "import sys; sys.argv[0] = 'twistd'; from twisted.scripts.twistd import run; run()" \
  -n --pidfile= kapiserver --config "$T/apiserver.yaml" >"$T/server.log" 2>&1) &
pids+=($!)
export KUBECONFIG=$T/admin.kubeconfig
for _ in $(seq 120); do
  [ -f "$KUBECONFIG" ] && [ "$(kubectl get --raw /readyz 2>/dev/null)" = ok ] && break
  kill -0 "${pids[0]}" 2>/dev/null || { echo "kapiserver exited:"; tail -20 "$T/server.log"; exit 1; }
  sleep 1
done
[ "$(kubectl get --raw /readyz 2>/dev/null)" = ok ] || { echo "kapiserver not ready"; exit 1; }

if [ "${STANDALONE:-0}" != 1 ]; then
  KCM_PID=$(cd "$ROOT" && "$PY" - "$T" "https://127.0.0.1:$PORT" <<'EOF'
import os, sys
from kapiserver.testing import control_plane
workdir, url = sys.argv[1], sys.argv[2]
print(control_plane.ControllerManagerProcess(url, os.path.join(workdir, "certs"), workdir).start().proc.pid)
EOF
)
  pids+=("$KCM_PID")
  for _ in $(seq 60); do grep -q "Started controller" "$T/kube-controller-manager.log" 2>/dev/null && break; sleep 1; done
fi

# the anchor kit's scripts read $ANCHORS_DIR/admin.kubeconfig and $ANCHORS_DIR/bin
mkdir -p "$T/anchor/run" && ln -s "$ANCHORS_DIR/bin" "$T/anchor/bin" && cp "$KUBECONFIG" "$T/anchor/admin.kubeconfig"
ANCHORS_DIR=$T/anchor "$KIT/add-fake-node.sh" --heartbeat >"$T/fake-node.log" 2>&1 || { cat "$T/fake-node.log"; exit 1; }

echo "kapiserver https://127.0.0.1:$PORT ($T), results in $OUT"
# (in OUTDIR: e2e.test writes its junit.xml report to the working directory)
cd "$OUT" && ANCHORS_DIR=$T/anchor "$KIT/conformance.sh" "$T/anchor/admin.kubeconfig" "$OUT"
