# The Kubeflow training-operator (github.com/kubeflow/training-operator, the
# released module, unmodified) run out of cluster against the stack's own
# apiserver, so that PyTorchJobs really get pods on kwok nodes
# (docs/design/operators.md). Not a default component: `scripts/stack up
# training` adds it to a running stack (kube must be up) and the stack
# remembers it (common.sh). Sourced by scripts/stack; defines training_install
# training_up training_down training_healthy training_address training_versions
# training_env.
#
# What `up` does, each step idempotent:
#   - builds the binary once per user with
#     `go install github.com/kubeflow/training-operator/cmd/training-operator.v1@VERSION`
#     into $KUOTA_CACHE/training-operator-VERSION/bin, with the module and build
#     caches kube.sh uses (the module has no replace directives);
#   - applies the module's CRDs server-side (manifests/base/crds/kubeflow.org_*.yaml),
#     creates the namespace kubeflow;
#   - makes the webhook's certificates (below) and stores them in the Secret
#     kubeflow/training-operator-webhook-cert;
#   - starts the binary with one --enable-scheme per KUOTA_TRAINING_SCHEMES,
#     no gang scheduler, leader election and metrics off, health on 127.0.0.1;
#   - once /readyz answers, registers the validating webhooks of the enabled
#     kinds (manifests/base/webhook/manifests.yaml) as
#     validator.training-operator.kubeflow.org, url https://127.0.0.1:PORT/<path>.
#
# The webhook cannot be turned off in v1.8.1: main() always runs the
# cert-controller rotator, and /readyz waits for it. The rotator keeps the
# Secret's pair only if the CA names itself (DNS SAN training-operator-ca) and
# the serving certificate is valid for training-operator.kubeflow.svc; ours also
# names 127.0.0.1, which is what the apiserver dials. Inside a pod the Secret is
# mounted at /tmp/k8s-webhook-server/serving-certs; out of cluster the rotator
# only checks that /tmp/k8s-webhook-server/serving-certs/tls.crt exists (a fixed
# path, shared by every stack on the machine: it is created if missing and
# never read), while the webhook server reads its pair from
# $TMPDIR/k8s-webhook-server/serving-certs, with TMPDIR private to this stack.
# The webhook server listens on every interface (v1.8.1 has no host flag).
#
# Knobs: KUOTA_TRAINING_VERSION (v1.8.1), KUOTA_TRAINING_SCHEMES ("pytorchjob";
# any of tfjob pytorchjob mxjob xgboostjob paddlejob), KUOTA_TRAINING_WEBHOOK_PORT
# (19444), KUOTA_TRAINING_HEALTH_PORT (18082), KUOTA_TRAINING_LOG_LEVEL (info).

: "${KUOTA_TRAINING_VERSION:=v1.8.1}"
: "${KUOTA_TRAINING_SCHEMES:=pytorchjob}"
: "${KUOTA_TRAINING_WEBHOOK_PORT:=19444}"
: "${KUOTA_TRAINING_HEALTH_PORT:=18082}"
: "${KUOTA_TRAINING_LOG_LEVEL:=info}"

_training_dir=$KUOTA_STACK_DIR/training
_training_cache=$KUOTA_CACHE/training-operator-$KUOTA_TRAINING_VERSION
_training_bin=$_training_cache/bin/training-operator.v1
_training_module=github.com/kubeflow/training-operator
_training_ns=kubeflow
_training_vwc=validator.training-operator.kubeflow.org
_training_rotator_marker=/tmp/k8s-webhook-server/serving-certs/tls.crt

# The module's directory in the shared module cache (downloaded if missing;
# the path needs no case-encoding: the module path is lower case).
_training_src() {
  local json dir="$KUOTA_CACHE/go/mod/$_training_module@$KUOTA_TRAINING_VERSION"
  if [ -d "$dir/manifests/base/crds" ]; then echo "$dir"; return 0; fi
  _kube_need_go
  json=$(cd "$KUOTA_CACHE" && _kube_go mod download -json "$_training_module@$KUOTA_TRAINING_VERSION") \
    || die "training: cannot download $_training_module@$KUOTA_TRAINING_VERSION from the Go module proxy"
  dir=$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
  [ -d "$dir/manifests/base/crds" ] || die "training: no CRDs in $dir/manifests/base/crds"
  echo "$dir"
}

training_install() {
  [ -x "$_training_bin" ] && return 0
  _kube_need_go
  mkdir -p "$_training_cache"
  exec 7>"$KUOTA_CACHE/.training-operator-build.lock"
  if ! flock -n 7; then
    log "training: another build holds $KUOTA_CACHE/.training-operator-build.lock; waiting"
    flock 7
  fi
  if [ ! -x "$_training_bin" ]; then
    log "training: building $_training_module $KUOTA_TRAINING_VERSION (the first build takes ~4-6 min on 2 cores), log: $_training_cache/build.log"
    local t0 d=$_training_cache
    t0=$(date +%s)
    rm -rf "$d/bin.tmp"; mkdir -p "$d/bin.tmp"
    GOBIN="$d/bin.tmp" _kube_logf=$d/build.log _kube_run_logged "go install (training-operator $KUOTA_TRAINING_VERSION)" \
      _kube_go install -p "$KUOTA_GO_BUILD_JOBS" -trimpath -ldflags "-s -w" \
      "$_training_module/cmd/training-operator.v1@$KUOTA_TRAINING_VERSION"
    rm -rf "${d:?}/bin"; mv "$d/bin.tmp" "$d/bin"
    log "training: built $KUOTA_TRAINING_VERSION in $(( $(date +%s) - t0 ))s"
  fi
  flock -u 7; exec 7>&-
}

_training_kubectl() { "$_kube_bin/kubectl" --kubeconfig="$_kube_dir/kubeconfig" "$@"; }

# The webhook's CA and serving pair (RSA, as the rotator's own), made once per
# stack and kept while the serving certificate has a year left (the rotator
# replaces a pair expiring within 90 days, and its pair does not name 127.0.0.1).
_training_certs() {
  local c=$_training_dir/certs
  if grep -q "BEGIN RSA PRIVATE KEY" "$c/ca.key" 2>/dev/null && [ -s "$c/tls.key" ] && openssl x509 -in "$c/tls.crt" -noout -checkend $((365 * 86400)) >/dev/null 2>&1; then
    return 0
  fi
  rm -rf "$c"; mkdir -p "$c"
  (
    set -e
    cd "$c"
    umask 077
    openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 3650 -keyout ca.key -out ca.crt \
      -subj "/O=training-operator/CN=training-operator-ca" \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
      -addext "subjectAltName=DNS:training-operator-ca"
    openssl req -newkey rsa:2048 -nodes -sha256 -keyout tls.key -out tls.csr \
      -subj "/CN=training-operator.$_training_ns.svc"
    printf '%s\n' "basicConstraints=CA:FALSE" "keyUsage=critical,digitalSignature,keyEncipherment" \
      "extendedKeyUsage=serverAuth" \
      "subjectAltName=DNS:training-operator.$_training_ns.svc,DNS:localhost,IP:127.0.0.1" >tls.ext
    openssl x509 -req -sha256 -days 3650 -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
      -extfile tls.ext -out tls.crt
    rm -f tls.csr tls.ext ca.srl
    # the rotator parses the CA key as PKCS#1 ("RSA PRIVATE KEY"); OpenSSL 3 writes
    # PKCS#8 unless told otherwise, OpenSSL 1.1's `rsa` writes PKCS#1 and has no flag
    for k in ca.key tls.key; do
      openssl rsa -in "$k" -traditional -out "$k.rsa" 2>/dev/null || openssl rsa -in "$k" -out "$k.rsa"
      mv "$k.rsa" "$k"
    done
  ) >>"$KUOTA_STACK_DIR/logs/training-setup.log" 2>&1 || die "training: openssl failed (log: $KUOTA_STACK_DIR/logs/training-setup.log)"
}

# The validating webhooks of the enabled kinds only: a registered path nobody
# serves would fail every create of that kind.
_training_webhooks() {
  local src=$1 out=$_training_dir/webhooks.yaml
  python3 - "$src/manifests/base/webhook/manifests.yaml" "$_training_dir/certs/ca.crt" \
    "https://127.0.0.1:$KUOTA_TRAINING_WEBHOOK_PORT" "$_training_vwc" "$KUOTA_TRAINING_SCHEMES" \
    >"$out.tmp" <<'PY' || die "training: cannot write the webhook registration"
import base64, sys, yaml
manifests, ca, base, name, schemes = sys.argv[1:6]
bundle = base64.b64encode(open(ca, "rb").read()).decode()
wanted = {s.lower() + "s" for s in schemes.replace(",", " ").split()}
(doc,) = [d for d in yaml.safe_load_all(open(manifests)) if d]
kept = []
for w in doc["webhooks"]:
    if not {r for rule in w["rules"] for r in rule["resources"]} <= wanted:
        continue
    w["clientConfig"] = {"url": base + w["clientConfig"]["service"]["path"], "caBundle": bundle}
    kept.append(w)
if not kept:
    sys.exit(f"no webhook in {manifests} for {sorted(wanted)}")
doc["metadata"] = {"name": name, "labels": {"app.kubernetes.io/managed-by": "kuota-stack"}}
doc["webhooks"] = kept
yaml.safe_dump(doc, sys.stdout, sort_keys=False)
PY
  mv "$out.tmp" "$out"
  _kube_logf=$KUOTA_STACK_DIR/logs/training-setup.log _kube_run_logged "kubectl apply webhook" \
    _training_kubectl apply -f "$out"
}

_training_ok() { [ "$(curl -fsS -m 3 "http://127.0.0.1:$KUOTA_TRAINING_HEALTH_PORT/readyz" 2>/dev/null)" = ok ]; }

training_healthy() {
  pid_alive training && _training_ok \
    && _training_kubectl get validatingwebhookconfiguration "$_training_vwc" >/dev/null 2>&1
}

training_up() {
  local t0; t0=$(date +%s)
  training_install
  kube_healthy || die "training: the stack's kube component is not up (start it first: scripts/stack up kube)"
  command -v openssl >/dev/null || die "training: openssl is needed for the webhook's certificates"
  local src; src=$(_training_src)
  mkdir -p "$_training_dir/tmp/k8s-webhook-server/serving-certs"
  local setup=$KUOTA_STACK_DIR/logs/training-setup.log
  local -a crds
  mapfile -t crds < <(ls "$src"/manifests/base/crds/kubeflow.org_*.yaml)
  _kube_logf=$setup _kube_run_logged "kubectl apply CRDs (server-side)" \
    _training_kubectl apply --server-side --force-conflicts "${crds[@]/#/--filename=}"
  _kube_logf=$setup _kube_run_logged "kubectl wait CRDs" \
    _training_kubectl wait --for=condition=Established --timeout=60s "${crds[@]/#/--filename=}"
  _training_kubectl get namespace "$_training_ns" >/dev/null 2>&1 \
    || _kube_logf=$setup _kube_run_logged "kubectl create namespace" _training_kubectl create namespace "$_training_ns"
  _training_certs
  local c=$_training_dir/certs
  cp "$c/tls.crt" "$c/tls.key" "$_training_dir/tmp/k8s-webhook-server/serving-certs/"
  (umask 077; _training_kubectl -n "$_training_ns" create secret generic training-operator-webhook-cert \
    --from-file="$c/ca.crt" --from-file="$c/ca.key" --from-file="$c/tls.crt" --from-file="$c/tls.key" \
    --dry-run=client -o yaml >"$_training_dir/secret.yaml")
  _kube_logf=$setup _kube_run_logged "kubectl apply webhook Secret" \
    _training_kubectl apply --server-side --force-conflicts -f "$_training_dir/secret.yaml"
  if [ ! -e "$_training_rotator_marker" ]; then
    { mkdir -p "${_training_rotator_marker%/*}" && cp "$c/tls.crt" "$_training_rotator_marker"; } 2>/dev/null \
      || die "training: cannot create $_training_rotator_marker (the operator's cert rotator waits for that file, hard-coded)"
  fi
  if ! pid_alive training; then
    port_open "$KUOTA_TRAINING_WEBHOOK_PORT" && die "training: port $KUOTA_TRAINING_WEBHOOK_PORT is in use; set KUOTA_TRAINING_WEBHOOK_PORT"
    port_open "$KUOTA_TRAINING_HEALTH_PORT" && die "training: 127.0.0.1:$KUOTA_TRAINING_HEALTH_PORT is in use; set KUOTA_TRAINING_HEALTH_PORT"
    local -a schemes=() s
    for s in ${KUOTA_TRAINING_SCHEMES//,/ }; do schemes+=("--enable-scheme=$s"); done
    [ ${#schemes[@]} -gt 0 ] || die "training: KUOTA_TRAINING_SCHEMES is empty"
    echo "### $(date -Is) starting training-operator $KUOTA_TRAINING_VERSION" >>"$KUOTA_STACK_DIR/logs/training.log"
    start_bg training "$KUOTA_STACK_DIR/logs/training.log" \
      env MY_POD_NAMESPACE="$_training_ns" TMPDIR="$_training_dir/tmp" \
      "$_training_bin" --kubeconfig="$_kube_dir/kubeconfig" "${schemes[@]}" --leader-elect=false --metrics-bind-address=0 \
      --health-probe-bind-address="127.0.0.1:$KUOTA_TRAINING_HEALTH_PORT" \
      --webhook-server-port="$KUOTA_TRAINING_WEBHOOK_PORT" \
      --zap-devel=false --zap-encoder=console --zap-log-level="$KUOTA_TRAINING_LOG_LEVEL"
  fi
  local deadline=$(( $(date +%s) + 120 ))
  until _training_ok; do
    if ! pid_alive training; then
      tail -n 20 "$KUOTA_STACK_DIR/logs/training.log" >&2 || true
      die "training: exited during startup (log: $KUOTA_STACK_DIR/logs/training.log)"
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
      stop_pid training
      die "training: not ready within 120s, stopped (log: $KUOTA_STACK_DIR/logs/training.log)"
    fi
    sleep 0.5
  done
  _training_webhooks "$src"
  log "training: training-operator $KUOTA_TRAINING_VERSION up in $(( $(date +%s) - t0 ))s (pid $(cat "$KUOTA_STACK_DIR/run/training.pid"), schemes: $KUOTA_TRAINING_SCHEMES, webhook :$KUOTA_TRAINING_WEBHOOK_PORT)"
}

training_down() {
  if [ -f "$KUOTA_STACK_DIR/run/training.pid" ]; then
    # the registration would fail every create of the kinds while nobody serves it
    if _kube_apiserver_ok 2>/dev/null; then
      _training_kubectl delete validatingwebhookconfiguration "$_training_vwc" --ignore-not-found >/dev/null 2>&1 || true
    fi
    stop_pid training
    log "training: stopped"
  fi
}

training_address() { echo "https://127.0.0.1:$KUOTA_TRAINING_WEBHOOK_PORT (webhook), http://127.0.0.1:$KUOTA_TRAINING_HEALTH_PORT/readyz"; }

training_versions() {
  local b=not-installed
  [ -x "$_training_bin" ] && b=$KUOTA_TRAINING_VERSION
  echo "training-operator $b $_training_bin"
}

training_env() {
  echo "export KUOTA_TRAINING_VERSION=$KUOTA_TRAINING_VERSION"
  echo "export KUOTA_TRAINING_SCHEMES='$KUOTA_TRAINING_SCHEMES'"
  echo "export KUOTA_TRAINING_HEALTH_URL=http://127.0.0.1:$KUOTA_TRAINING_HEALTH_PORT/readyz"
  echo "export KUOTA_TRAINING_PID_FILE=$KUOTA_STACK_DIR/run/training.pid"
}
