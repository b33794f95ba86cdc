# The KubeRay operator (github.com/ray-project/kuberay/ray-operator, the
# released module, unmodified) run out of cluster against the stack's own
# apiserver, so that RayClusters really get pods on kwok nodes
# (docs/design/operators.md). Not a default component: `scripts/stack up
# kuberay` adds it to a running stack (kube must be up) and the stack remembers
# it (common.sh). Sourced by scripts/stack; defines kuberay_install kuberay_up
# kuberay_down kuberay_healthy kuberay_address kuberay_versions kuberay_env.
#
# What `up` does, each step idempotent:
#   - builds the binary once per user with
#     `go install github.com/ray-project/kuberay/ray-operator@VERSION` (the module
#     root is package main; no replace directives) into
#     $KUOTA_CACHE/kuberay-VERSION/bin, with the module and build caches kube.sh uses;
#   - applies the module's CRDs server-side (config/crd/bases/: RayCluster, RayJob,
#     RayService);
#   - starts the binary with leader election and metrics off, health on 127.0.0.1.
#
# No webhook: KubeRay registers its only one (RayCluster validation) when
# ENABLE_WEBHOOKS=true, which its default install leaves unset; so does this
# component. No batch scheduler (no gang scheduling). A RayJob needs the Ray
# head's dashboard to submit to, which kwok pods do not serve: it gets its
# RayCluster and pods, but never runs (tests/integration/test_stack_kuberay.py).
#
# Knobs: KUOTA_KUBERAY_VERSION (v1.5.0), KUOTA_KUBERAY_HEALTH_PORT (18083),
# KUOTA_KUBERAY_FEATURE_GATES (--feature-gates), KUOTA_KUBERAY_LOG_LEVEL (info).

: "${KUOTA_KUBERAY_VERSION:=v1.5.0}"
: "${KUOTA_KUBERAY_HEALTH_PORT:=18083}"
: "${KUOTA_KUBERAY_FEATURE_GATES:=}"
: "${KUOTA_KUBERAY_LOG_LEVEL:=info}"

_kuberay_cache=$KUOTA_CACHE/kuberay-$KUOTA_KUBERAY_VERSION
_kuberay_bin=$_kuberay_cache/bin/ray-operator
_kuberay_module=github.com/ray-project/kuberay/ray-operator

# The module's directory in the shared module cache (downloaded if missing;
# the path needs no case-encoding: the module path is lower case).
_kuberay_src() {
  local json dir="$KUOTA_CACHE/go/mod/$_kuberay_module@$KUOTA_KUBERAY_VERSION"
  if [ -d "$dir/config/crd/bases" ]; then echo "$dir"; return 0; fi
  _kube_need_go
  json=$(cd "$KUOTA_CACHE" && _kube_go mod download -json "$_kuberay_module@$KUOTA_KUBERAY_VERSION") \
    || die "kuberay: cannot download $_kuberay_module@$KUOTA_KUBERAY_VERSION from the Go module proxy"
  dir=$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
  [ -d "$dir/config/crd/bases" ] || die "kuberay: no CRDs in $dir/config/crd/bases"
  echo "$dir"
}

kuberay_install() {
  [ -x "$_kuberay_bin" ] && return 0
  _kube_need_go
  mkdir -p "$_kuberay_cache"
  exec 7>"$KUOTA_CACHE/.kuberay-build.lock"
  if ! flock -n 7; then
    log "kuberay: another build holds $KUOTA_CACHE/.kuberay-build.lock; waiting"
    flock 7
  fi
  if [ ! -x "$_kuberay_bin" ]; then
    log "kuberay: building $_kuberay_module $KUOTA_KUBERAY_VERSION (the first build takes ~5-7 min on 2 cores), log: $_kuberay_cache/build.log"
    local t0 d=$_kuberay_cache
    t0=$(date +%s)
    rm -rf "$d/bin.tmp"; mkdir -p "$d/bin.tmp"
    GOBIN="$d/bin.tmp" _kube_logf=$d/build.log _kube_run_logged "go install (kuberay $KUOTA_KUBERAY_VERSION)" \
      _kube_go install -p "$KUOTA_GO_BUILD_JOBS" -trimpath -ldflags "-s -w" "$_kuberay_module@$KUOTA_KUBERAY_VERSION"
    rm -rf "${d:?}/bin"; mv "$d/bin.tmp" "$d/bin"
    log "kuberay: built $KUOTA_KUBERAY_VERSION in $(( $(date +%s) - t0 ))s"
  fi
  flock -u 7; exec 7>&-
}

_kuberay_kubectl() { "$_kube_bin/kubectl" --kubeconfig="$_kube_dir/kubeconfig" "$@"; }

_kuberay_ok() { [ "$(curl -fsS -m 3 "http://127.0.0.1:$KUOTA_KUBERAY_HEALTH_PORT/readyz" 2>/dev/null)" = ok ]; }

kuberay_healthy() { pid_alive kuberay && _kuberay_ok; }

kuberay_up() {
  local t0; t0=$(date +%s)
  kuberay_install
  kube_healthy || die "kuberay: the stack's kube component is not up (start it first: scripts/stack up kube)"
  local src; src=$(_kuberay_src)
  local setup=$KUOTA_STACK_DIR/logs/kuberay-setup.log
  _kube_logf=$setup _kube_run_logged "kubectl apply CRDs (server-side)" \
    _kuberay_kubectl apply --server-side --force-conflicts -f "$src/config/crd/bases/"
  _kube_logf=$setup _kube_run_logged "kubectl wait CRDs" \
    _kuberay_kubectl wait --for=condition=Established --timeout=60s -f "$src/config/crd/bases/"
  if ! pid_alive kuberay; then
    port_open "$KUOTA_KUBERAY_HEALTH_PORT" && die "kuberay: 127.0.0.1:$KUOTA_KUBERAY_HEALTH_PORT is in use; set KUOTA_KUBERAY_HEALTH_PORT"
    local -a gates=()
    [ -z "$KUOTA_KUBERAY_FEATURE_GATES" ] || gates=("--feature-gates=$KUOTA_KUBERAY_FEATURE_GATES")
    echo "### $(date -Is) starting kuberay $KUOTA_KUBERAY_VERSION" >>"$KUOTA_STACK_DIR/logs/kuberay.log"
    start_bg kuberay "$KUOTA_STACK_DIR/logs/kuberay.log" \
      env -u ENABLE_WEBHOOKS "$_kuberay_bin" --kubeconfig="$_kube_dir/kubeconfig" \
      --enable-leader-election=false --metrics-addr=0 \
      --health-probe-bind-address="127.0.0.1:$KUOTA_KUBERAY_HEALTH_PORT" \
      --log-stdout-encoder=console --zap-log-level="$KUOTA_KUBERAY_LOG_LEVEL" "${gates[@]}"
  fi
  local deadline=$(( $(date +%s) + 120 ))
  until _kuberay_ok; do
    if ! pid_alive kuberay; then
      tail -n 20 "$KUOTA_STACK_DIR/logs/kuberay.log" >&2 || true
      die "kuberay: exited during startup (log: $KUOTA_STACK_DIR/logs/kuberay.log)"
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
      stop_pid kuberay
      die "kuberay: not ready within 120s, stopped (log: $KUOTA_STACK_DIR/logs/kuberay.log)"
    fi
    sleep 0.5
  done
  log "kuberay: $KUOTA_KUBERAY_VERSION up in $(( $(date +%s) - t0 ))s (pid $(cat "$KUOTA_STACK_DIR/run/kuberay.pid"))"
}

kuberay_down() {
  if [ -f "$KUOTA_STACK_DIR/run/kuberay.pid" ]; then
    stop_pid kuberay
    log "kuberay: stopped"
  fi
}

kuberay_address() { echo "http://127.0.0.1:$KUOTA_KUBERAY_HEALTH_PORT/readyz"; }

kuberay_versions() {
  local b=not-installed
  [ -x "$_kuberay_bin" ] && b=$KUOTA_KUBERAY_VERSION
  echo "kuberay-operator $b $_kuberay_bin"
}

kuberay_env() {
  echo "export KUOTA_KUBERAY_VERSION=$KUOTA_KUBERAY_VERSION"
  echo "export KUOTA_KUBERAY_HEALTH_URL=http://127.0.0.1:$KUOTA_KUBERAY_HEALTH_PORT/readyz"
  echo "export KUOTA_KUBERAY_PID_FILE=$KUOTA_STACK_DIR/run/kuberay.pid"
}
