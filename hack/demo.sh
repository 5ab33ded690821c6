#!/usr/bin/env bash
# `make demo`: a local control plane of its own, the CRD, the operator (as a background process on this machine) and
# the sample WebServer, Ready; then what to try. Idempotent: run it again to restart the operator.
#
# Usage: hack/demo.sh [up] | down | kubeconfig | cluster-name
#
# The demo never shares a cluster with the test suites: it runs its own cluster (DEMO_CLUSTER_NAME, default
# webserver-operator-demo) next to the tests' one (webserver-operator), so `make demo` followed by `make test` leaves
# a demo operator running that never sees, and is never disturbed by, what the tests do; `make demo-down` stops the
# demo operator and its cluster.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"

export CLUSTER_NAME="${DEMO_CLUSTER_NAME:-webserver-operator-demo}"
METRICS_PORT="${DEMO_METRICS_PORT:-8080}"
HEALTH_PORT="${DEMO_HEALTH_PORT:-8081}"

LOG_PREFIX=demo
# shellcheck source=lib.sh
source "${ROOT}/hack/lib.sh"

case "${1:-up}" in
up) ;;
cluster-name)
  printf '%s\n' "${CLUSTER_NAME}"
  exit 0
  ;;
kubeconfig) exec hack/cluster.sh kubeconfig ;;
down)
  [[ "${CLUSTER:-local}" == "kind" ]] && exec hack/kind.sh down
  # The operator runs with the cluster's kubeconfig in its command line, so stopping the cluster stops it too;
  # stop it first by its pid anyway, so it exits cleanly (releases its Lease) rather than being killed.
  pidfile="$(hack/cluster.sh kubeconfig)"
  pidfile="$(dirname "${pidfile}")/demo/operator.pid"
  if [[ -f "${pidfile}" ]] && kill "$(cat "${pidfile}")" 2>/dev/null; then
    log "stopping the demo operator (pid $(cat "${pidfile}"))"
    for _ in $(seq 1 60); do
      kill -0 "$(cat "${pidfile}")" 2>/dev/null || break
      sleep 0.5
    done
  fi
  exec hack/cluster.sh down
  ;;
*) die "usage: hack/demo.sh [up] | down | kubeconfig | cluster-name" ;;
esac

BIN="$(hack/tools.sh bindir)"
KUBECTL="${BIN}/kubectl"
k() { "${KUBECTL}" --kubeconfig "${KUBECONFIG_PATH}" "$@"; }

if [[ "${CLUSTER:-local}" == "kind" ]]; then
  # Real containers: the image built from the Dockerfile (IMG), installed with the Helm chart as the README says,
  # with your kubectl and helm when they are recent enough (hack/tools.sh pick says which).
  IMG="${IMG:-localhost/webserver-operator:0.1.0}"
  KUBECTL="$(hack/tools.sh ensure kubectl)"
  HELM="$(hack/tools.sh ensure helm)"
  hack/kind.sh up
  KUBECONFIG_PATH="$(hack/kind.sh kubeconfig)"
  echo "== installing the chart with image ${IMG}"
  "${HELM}" --kubeconfig "${KUBECONFIG_PATH}" upgrade --install webserver-operator charts/webserver-operator \
    -n webserver-operator-system --create-namespace --take-ownership --wait --timeout 3m \
    --set image.repository="${IMG%:*}" --set image.tag="${IMG##*:}" --set image.pullPolicy=IfNotPresent
  # The sample's nginx where it can be pulled, else the stand-in web image hack/kind.sh loaded (same page).
  WEB_IMAGE="$(hack/kind.sh web-images | head -n 1)"
  echo "== applying the sample WebServer with image ${WEB_IMAGE}"
  sed "s|^\(  image:\).*|\1 ${WEB_IMAGE}|" config/samples/web_v1_webserver.yaml | k apply -f -
  k wait --for=condition=Ready webserver/webserver-sample --timeout=180s
  k get webserver,deployment,service,pods -l app.kubernetes.io/instance=webserver-sample -o wide
  NODE_IP="$(k get nodes -o jsonpath='{.items[0].status.addresses[?(@.type=="InternalIP")].address}')"
  NODE_PORT="$(k get webserver webserver-sample -o jsonpath='{.status.nodePort}')"
  echo "== curl http://${NODE_IP}:${NODE_PORT}/"
  curl -fsS --retry 10 --retry-delay 2 --retry-all-errors "http://${NODE_IP}:${NODE_PORT}/" | grep -i '<title>'
  cat <<TXT

Real pods on a kind node. Try:

  export KUBECONFIG=${KUBECONFIG_PATH}
  export PATH="$(dirname "${KUBECTL}"):$(dirname "${HELM}"):\$PATH"
  kubectl scale webserver/webserver-sample --replicas=4
  kubectl get pods -o wide -l app.kubernetes.io/instance=webserver-sample
  curl http://${NODE_IP}:${NODE_PORT}/
  kubectl logs -n webserver-operator-system deploy/webserver-operator
  helm test webserver-operator -n webserver-operator-system --logs

Stop: make kind-down
TXT
  exit 0
fi

hack/cluster.sh up
KUBECONFIG_PATH="$(hack/cluster.sh kubeconfig)"
# State (pid, log) lives with the demo's cluster: `hack/cluster.sh down` removes both.
STATE="$(dirname "${KUBECONFIG_PATH}")/demo"
mkdir -p "${STATE}"

echo "== installing the CRD (server-side apply, as for upgrades)"
k apply --server-side --force-conflicts --field-manager=webserver-operator-demo -f config/crd/bases/ >/dev/null
k wait --for=condition=Established crd/webservers.web.webserver-operator.dev --timeout=60s >/dev/null

if [[ -f "${STATE}/operator.pid" ]] && kill -0 "$(cat "${STATE}/operator.pid")" 2>/dev/null; then
  echo "== stopping the previous demo operator"
  kill "$(cat "${STATE}/operator.pid")" && sleep 1
fi
echo "== starting the operator (log: ${STATE}/operator.log)"
# /metrics as plain HTTP, chosen explicitly: it is bound to 127.0.0.1, so only this machine reads it (installed in a
# cluster, the operator serves it over HTTPS to tokens allowed to get /metrics; see docs/monitoring.md).
nohup .venv/bin/webserver-operator run --kubeconfig "${KUBECONFIG_PATH}" --log-format text \
  --health-probe-bind-address "127.0.0.1:${HEALTH_PORT}" --metrics-bind-address "127.0.0.1:${METRICS_PORT}" \
  --no-metrics-secure \
  >"${STATE}/operator.log" 2>&1 &
echo $! >"${STATE}/operator.pid"
for _ in $(seq 1 60); do
  curl -fs "http://127.0.0.1:${HEALTH_PORT}/readyz" >/dev/null 2>&1 && break
  kill -0 "$(cat "${STATE}/operator.pid")" 2>/dev/null || { tail -20 "${STATE}/operator.log"; exit 1; }
  sleep 0.5
done

echo "== applying the sample WebServer (config/samples)"
k apply -f config/samples/web_v1_webserver.yaml
k wait --for=condition=Ready webserver/webserver-sample --timeout=90s
k get webserver,deployment,service,pods -l app.kubernetes.io/instance=webserver-sample
k get webserver webserver-sample

cat <<TXT

The operator is running (pid $(cat "${STATE}/operator.pid"), log ${STATE}/operator.log). Try:

  export KUBECONFIG=${KUBECONFIG_PATH}
  export PATH="${BIN}:\$PATH"                     # the kubectl built for this cluster (v1.36)
  kubectl get webservers                                    # short name: ws
  kubectl scale webserver/webserver-sample --replicas=4
  kubectl describe webserver webserver-sample               # status, conditions, events
  kubectl patch ws webserver-sample --type=merge -p '{"spec":{"image":"nginx:1.28"}}'
  kubectl delete deployment webserver-sample                # the operator recreates it
  kubectl wait --for=condition=Ready webserver/webserver-sample --timeout=2m
  kubectl explain webserver.spec
  curl -s http://127.0.0.1:${METRICS_PORT}/metrics | grep controller_runtime_reconcile_total
  curl -s http://127.0.0.1:${HEALTH_PORT}/readyz

This is the demo's own cluster (${CLUSTER_NAME}); \`make test\` uses another one and leaves this one alone.
Stop: make demo-down (the operator and this cluster)
TXT
