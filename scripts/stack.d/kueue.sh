# Kueue itself (sigs.k8s.io/kueue, the released module, unmodified) run out of
# cluster against the stack's own apiserver: the referee of the differential
# scenarios and of the side-by-side benchmark (docs/design/kueue-side-by-side.md).
#
# kuota's CRDs use Kueue's group (kueue.x-k8s.io), so this component never
# shares a stack with kuota's: scripts/kueue-stack runs `scripts/stack` with
# KUOTA_STACK_DIR=.stack-kueue, KUOTA_COMPONENTS="kube kueue" and a port block
# of its own. Sourced by scripts/stack after kube.sh; defines kueue_install
# kueue_up kueue_down kueue_healthy kueue_address kueue_versions kueue_env.
#
# What `up` does, each step idempotent:
#   - builds the binary once per user with `go install sigs.k8s.io/kueue/cmd/kueue@VERSION`
#     into $KUOTA_CACHE/kueue-VERSION/bin (~9-11 min on 2 cores, ~110 MB stripped), with the
#     module and build caches kube.sh uses;
#   - applies Kueue's CRDs server-side from the module cache
#     (config/components/crd/bases/), creates the namespace kueue-system;
#   - makes a serving pair with scripts/webhook-certs in kueue/webhook (the CA is
#     the caBundle) and copies it to /etc/kueue/metrics/certs, which Kueue reads,
#     hard-coded, when internal cert management is off (cmd/kueue/main.go);
#   - writes kueue/config.yaml (below) and starts the binary with --config and
#     --kubeconfig;
#   - once /readyz answers (the webhook server is serving), registers the
#     webhooks of config/components/webhook/manifests.yaml for the Kueue kinds
#     and the kinds of KUOTA_KUEUE_FRAMEWORKS, with url https://127.0.0.1:PORT/<path> and the caBundle,
#     so that Jobs, PyTorchJobs and RayClusters are suspended at creation as in a
#     real install.
#
# Knobs: KUOTA_KUEUE_VERSION (v0.19.2: pin it, @latest resolves to an older
# release), KUOTA_KUEUE_WEBHOOK_PORT (19443), KUOTA_KUEUE_HEALTH_PORT (18081),
# KUOTA_KUEUE_DRA_ID (kq: the harness's hardware id; the Configuration maps
# DeviceClasses gpu-ID and mig-ID to the counter `memory` of driver
# ID.gpu.kuota.dev as resource gpu-memory, and wgpu-ID as whole-gpus),
# KUOTA_KUEUE_CONFIG (a Configuration file of your own instead),
# KUOTA_KUEUE_FRAMEWORKS (integrations.frameworks, "batch/job kubeflow.org/pytorchjob
# ray.io/raycluster": the last two need the training and kuberay components'
# CRDs, which scripts/kueue-stack installs before kueue starts),
# KUOTA_KUEUE_FEATURE_GATES (--feature-gates), KUOTA_KUEUE_LOG_LEVEL (zap level, info).

: "${KUOTA_KUEUE_VERSION:=v0.19.2}"
: "${KUOTA_KUEUE_WEBHOOK_PORT:=19443}"
: "${KUOTA_KUEUE_HEALTH_PORT:=18081}"
: "${KUOTA_KUEUE_DRA_ID:=kq}"
: "${KUOTA_KUEUE_CONFIG:=}"
: "${KUOTA_KUEUE_FEATURE_GATES:=}"
: "${KUOTA_KUEUE_FRAMEWORKS:=batch/job kubeflow.org/pytorchjob ray.io/raycluster}"
: "${KUOTA_KUEUE_LOG_LEVEL:=info}"

_kueue_dir=$KUOTA_STACK_DIR/kueue
_kueue_bin=$KUOTA_CACHE/kueue-$KUOTA_KUEUE_VERSION/bin
_kueue_module=sigs.k8s.io/kueue
_kueue_metrics_certs=/etc/kueue/metrics/certs
_kueue_build_log=$KUOTA_CACHE/kueue-$KUOTA_KUEUE_VERSION/build.log

# The module's directory in the shared module cache (downloaded if missing).
_kueue_src() {
  local json dir
  json=$(cd "$KUOTA_CACHE" && _kube_go mod download -json "$_kueue_module@$KUOTA_KUEUE_VERSION") \
    || die "kueue: cannot download $_kueue_module@$KUOTA_KUEUE_VERSION from the Go module proxy"
  dir=$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
  [ -d "$dir/config/components/crd/bases" ] || die "kueue: no CRDs in $dir/config/components/crd/bases"
  echo "$dir"
}

kueue_install() {
  [ -x "$_kueue_bin/kueue" ] && return 0
  _kube_need_go
  mkdir -p "$KUOTA_CACHE/kueue-$KUOTA_KUEUE_VERSION"
  exec 7>"$KUOTA_CACHE/.kueue-build.lock"
  if ! flock -n 7; then
    log "kueue: another build holds $KUOTA_CACHE/.kueue-build.lock; waiting"
    flock 7
  fi
  if [ ! -x "$_kueue_bin/kueue" ]; then
    log "kueue: building $_kueue_module $KUOTA_KUEUE_VERSION (the first build takes ~9 min on 2 cores), log: $_kueue_build_log"
    local t0 d=$KUOTA_CACHE/kueue-$KUOTA_KUEUE_VERSION
    t0=$(date +%s)
    rm -rf "$d/bin.tmp"; mkdir -p "$d/bin.tmp"
    GOBIN="$d/bin.tmp" _kube_logf=$_kueue_build_log _kube_run_logged "go install (kueue $KUOTA_KUEUE_VERSION)" \
      _kube_go install -p "$KUOTA_GO_BUILD_JOBS" -trimpath -ldflags "-s -w" "$_kueue_module/cmd/kueue@$KUOTA_KUEUE_VERSION"
    rm -rf "${d:?}/bin"; mv "$d/bin.tmp" "$d/bin"
    log "kueue: built $KUOTA_KUEUE_VERSION in $(( $(date +%s) - t0 ))s"
  fi
  flock -u 7; exec 7>&-
}

_kueue_config() {
  local f=$_kueue_dir/config.yaml id=$KUOTA_KUEUE_DRA_ID fw
  fw=$(printf '"%s", ' $KUOTA_KUEUE_FRAMEWORKS); fw="[${fw%, }]"
  if [ -n "$KUOTA_KUEUE_CONFIG" ]; then cp "$KUOTA_KUEUE_CONFIG" "$f"; return 0; fi
  cat >"$f.tmp" <<EOF
# written by scripts/stack.d/kueue.sh on every start; edits are overwritten
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kueue-system
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
webhook:
  host: 127.0.0.1
  port: $KUOTA_KUEUE_WEBHOOK_PORT
  certDir: $_kueue_dir/webhook
metrics:
  bindAddress: "0"
health:
  healthProbeBindAddress: 127.0.0.1:$KUOTA_KUEUE_HEALTH_PORT
featureGates:
  VisibilityOnDemand: false
integrations:
  frameworks: $fw
admissionFairSharing:
  usageHalfLifeTime: 10m
  usageSamplingInterval: 5s
resources:
  deviceClassMappings:
  - name: gpu-memory
    deviceClassNames: [gpu-$id, mig-$id]
    sources:
    - counter:
        name: memory
        driver: $id.gpu.kuota.dev
        deviceSelector:
          cel:
            expression: "device.driver == '$id.gpu.kuota.dev'"
  - name: whole-gpus
    deviceClassNames: [wgpu-$id]
EOF
  mv "$f.tmp" "$f"
}

_kueue_kubectl() { "$_kube_bin/kubectl" --kubeconfig="$_kube_dir/kubeconfig" "$@"; }

_kueue_ok() { [ "$(curl -fsS -m 3 "http://127.0.0.1:$KUOTA_KUEUE_HEALTH_PORT/readyz" 2>/dev/null)" = ok ]; }

kueue_healthy() {
  pid_alive kueue && _kueue_ok \
    && _kueue_kubectl get mutatingwebhookconfiguration kueue-mutating-webhook-configuration >/dev/null 2>&1
}

# Kueue's webhook registrations pointed at 127.0.0.1: only the Kueue kinds and
# the kinds of the integrations on (KUOTA_KUEUE_FRAMEWORKS; a registered path
# nobody serves would fail every Pod or Deployment create). The integrations'
# webhooks skip kube-system and kueue-system, as Kueue's kustomization does.
_kueue_webhooks() {
  local src=$1 out=$_kueue_dir/webhooks.yaml
  python3 - "$src/config/components/webhook/manifests.yaml" "$_kueue_dir/webhook/ca.crt" \
    "https://127.0.0.1:$KUOTA_KUEUE_WEBHOOK_PORT" "$KUOTA_KUEUE_FRAMEWORKS" >"$out.tmp" <<'PY' || die "kueue: cannot write the webhook registrations"
import base64, sys, yaml
manifests, ca, base, frameworks = sys.argv[1:5]
# "kubeflow.org/pytorchjob" -> (group, plural) as the webhook rules name them
served = {(f.split("/")[0], f.split("/")[1] + "s") for f in frameworks.split()}
bundle = base64.b64encode(open(ca, "rb").read()).decode()
skip = {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                              "values": ["kube-system", "kueue-system"]}]}
docs = []
for doc in yaml.safe_load_all(open(manifests)):
    if not doc:
        continue
    kept = []
    for w in doc["webhooks"]:
        groups = {g for r in w["rules"] for g in r["apiGroups"]}
        kinds = {(g, res) for r in w["rules"] for g in r["apiGroups"] for res in r["resources"]}
        if groups != {"kueue.x-k8s.io"} and not kinds <= served:
            continue
        path = w["clientConfig"]["service"]["path"]
        w["clientConfig"] = {"url": base + path, "caBundle": bundle}
        if groups != {"kueue.x-k8s.io"}:
            w["namespaceSelector"] = skip
        kept.append(w)
    doc["metadata"]["name"] = "kueue-" + doc["metadata"]["name"]
    doc["webhooks"] = kept
    docs.append(doc)
yaml.safe_dump_all(docs, sys.stdout, sort_keys=False)
PY
  mv "$out.tmp" "$out"
  _kube_logf=$KUOTA_STACK_DIR/logs/kueue-setup.log _kube_run_logged "kubectl apply webhooks" \
    _kueue_kubectl apply -f "$out"
}

kueue_up() {
  local t0; t0=$(date +%s)
  kueue_install
  kube_healthy || die "kueue: the stack's kube component is not up (KUOTA_COMPONENTS must list kube before kueue)"
  local src; src=$(_kueue_src)
  mkdir -p "$_kueue_dir"
  local setup=$KUOTA_STACK_DIR/logs/kueue-setup.log
  _kube_logf=$setup _kube_run_logged "kubectl apply CRDs (server-side)" \
    _kueue_kubectl apply --server-side --force-conflicts -f "$src/config/components/crd/bases/"
  _kube_logf=$setup _kube_run_logged "kubectl wait CRDs" \
    _kueue_kubectl wait --for=condition=Established --timeout=60s -f "$src/config/components/crd/bases/"
  _kueue_kubectl get namespace kueue-system >/dev/null 2>&1 \
    || _kube_logf=$setup _kube_run_logged "kubectl create namespace" _kueue_kubectl create namespace kueue-system
  "$KUOTA_ROOT/scripts/webhook-certs" "$_kueue_dir/webhook" >>"$setup" 2>&1 \
    || die "kueue: scripts/webhook-certs failed (log: $setup)"
  if ! mkdir -p "$_kueue_metrics_certs" 2>/dev/null \
     || ! cp "$_kueue_dir/webhook/tls.crt" "$_kueue_dir/webhook/tls.key" "$_kueue_metrics_certs/" 2>/dev/null; then
    die "kueue: cannot write $_kueue_metrics_certs (Kueue reads its metrics certificate there, hard-coded, when internal cert management is off; run as root or create it writable)"
  fi
  _kueue_config
  if ! pid_alive kueue; then
    port_open "$KUOTA_KUEUE_WEBHOOK_PORT" && die "kueue: 127.0.0.1:$KUOTA_KUEUE_WEBHOOK_PORT is in use; set KUOTA_KUEUE_WEBHOOK_PORT"
    port_open "$KUOTA_KUEUE_HEALTH_PORT" && die "kueue: 127.0.0.1:$KUOTA_KUEUE_HEALTH_PORT is in use; set KUOTA_KUEUE_HEALTH_PORT"
    local -a gates=()
    [ -z "$KUOTA_KUEUE_FEATURE_GATES" ] || gates=("--feature-gates=$KUOTA_KUEUE_FEATURE_GATES")
    echo "### $(date -Is) starting kueue $KUOTA_KUEUE_VERSION" >>"$KUOTA_STACK_DIR/logs/kueue.log"
    start_bg kueue "$KUOTA_STACK_DIR/logs/kueue.log" "$_kueue_bin/kueue" \
      --config="$_kueue_dir/config.yaml" --kubeconfig="$_kube_dir/kubeconfig" \
      --zap-log-level="$KUOTA_KUEUE_LOG_LEVEL" "${gates[@]}"
  fi
  local deadline=$(( $(date +%s) + 120 ))
  until _kueue_ok; do
    if ! pid_alive kueue; then
      tail -n 20 "$KUOTA_STACK_DIR/logs/kueue.log" >&2 || true
      die "kueue: exited during startup (log: $KUOTA_STACK_DIR/logs/kueue.log)"
    fi
    [ "$(date +%s)" -lt "$deadline" ] || die "kueue: not ready within 120s (log: $KUOTA_STACK_DIR/logs/kueue.log)"
    sleep 0.5
  done
  _kueue_webhooks "$src"
  log "kueue: $KUOTA_KUEUE_VERSION up in $(( $(date +%s) - t0 ))s (pid $(cat "$KUOTA_STACK_DIR/run/kueue.pid"), webhook 127.0.0.1:$KUOTA_KUEUE_WEBHOOK_PORT)"
}

kueue_down() {
  if [ -f "$KUOTA_STACK_DIR/run/kueue.pid" ]; then
    # the registrations would fail every Job create while nobody serves them
    if _kube_apiserver_ok 2>/dev/null; then
      _kueue_kubectl delete mutatingwebhookconfiguration kueue-mutating-webhook-configuration --ignore-not-found >/dev/null 2>&1 || true
      _kueue_kubectl delete validatingwebhookconfiguration kueue-validating-webhook-configuration --ignore-not-found >/dev/null 2>&1 || true
    fi
    stop_pid kueue
    log "kueue: stopped"
  fi
}

kueue_address() { echo "https://127.0.0.1:$KUOTA_KUEUE_WEBHOOK_PORT (webhook), http://127.0.0.1:$KUOTA_KUEUE_HEALTH_PORT/readyz"; }

kueue_versions() {
  local b=not-installed
  [ -x "$_kueue_bin/kueue" ] && b=$KUOTA_KUEUE_VERSION
  echo "kueue $b $_kueue_bin/kueue"
}

kueue_env() {
  echo "export KUOTA_KUEUE_VERSION=$KUOTA_KUEUE_VERSION"
  echo "export KUOTA_KUEUE_BIN=$_kueue_bin/kueue"
  echo "export KUOTA_KUEUE_DRA_ID=$KUOTA_KUEUE_DRA_ID"
  echo "export KUOTA_KUEUE_PID_FILE=$KUOTA_STACK_DIR/run/kueue.pid"
}
