# Kubernetes control plane of the local stack: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler and kwok (fake nodes and pods), all on
# 127.0.0.1, built from source with Go from the Go module proxy and cached per
# user and version under $KUOTA_CACHE (see docs/design/local-kube.md).
#
# Sourced by scripts/stack; defines kube_install kube_up kube_down kube_healthy
# kube_address kube_versions kube_env. Everything private is prefixed _kube_.
#
# Knobs (environment, defaults below): versions KUOTA_KUBE_VERSION,
# KUOTA_ETCD_VERSION, KUOTA_KWOK_VERSION; ports KUOTA_ETCD_PORT,
# KUOTA_ETCD_PEER_PORT, KUOTA_APISERVER_PORT, KUOTA_KCM_PORT,
# KUOTA_SCHEDULER_PORT, KUOTA_KWOK_PORT; KUOTA_KUBE_FEATURE_GATES (extra
# --feature-gates for apiserver, controller-manager and scheduler alike, beside
# DRADeviceTaintRules=true);
# KUOTA_GO_BUILD_JOBS (go build -p, default 2); KUOTA_KWOK_LOG_LEVEL (WARN; INFO
# logs every pod patch and lease renewal); KUOTA_KCM_API_QPS / KUOTA_KCM_API_BURST
# (controller-manager's client rate limit, default 20/30 as upstream; the fault
# runs raise it so their thousand Jobs' pods and claims are not throttled).

: "${KUOTA_KUBE_VERSION:=v1.36.3}"
: "${KUOTA_ETCD_VERSION:=v3.6.16}"
: "${KUOTA_KWOK_VERSION:=v0.8.0}"
: "${KUOTA_ETCD_PORT:=12379}"
: "${KUOTA_ETCD_PEER_PORT:=12380}"
: "${KUOTA_APISERVER_PORT:=16443}"
: "${KUOTA_KCM_PORT:=20257}"
: "${KUOTA_SCHEDULER_PORT:=20259}"
: "${KUOTA_KWOK_PORT:=20263}"
: "${KUOTA_KUBE_FEATURE_GATES:=}"
: "${KUOTA_GO_BUILD_JOBS:=2}"
: "${KUOTA_KWOK_LOG_LEVEL:=WARN}"

_kube_dir=$KUOTA_STACK_DIR/kube
_kube_src=$KUOTA_ROOT/scripts/kube
_kube_bin=$KUOTA_CACHE/kube-$KUOTA_KUBE_VERSION/bin
_kube_etcd_bin=$KUOTA_CACHE/etcd-$KUOTA_ETCD_VERSION/bin
_kube_kwok_bin=$KUOTA_CACHE/kwok-$KUOTA_KWOK_VERSION/bin
_kube_build_log=$KUOTA_STACK_DIR/logs/kube-build.log
_kube_service_cidr=10.96.0.0/16
# start order; kube_down stops in reverse
_kube_procs="etcd apiserver controller-manager scheduler kwok"

# ---------------------------------------------------------------- build

# Go with a per-user module and build cache, so that every clone shares them.
_kube_go() {
  GOMODCACHE="$KUOTA_CACHE/go/mod" GOCACHE="$KUOTA_CACHE/go/build" \
  GOPATH="$KUOTA_CACHE/go" GOTOOLCHAIN=local GOFLAGS=-buildvcs=false \
  GOWORK=off GO111MODULE=on CGO_ENABLED=0 \
    nice -n 10 go "$@"
}

_kube_need_go() {
  if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
    PATH=$PATH:/usr/local/go/bin
  fi
  command -v go >/dev/null 2>&1 || die "kube: Go >= 1.26 is needed to build the control plane; none on PATH"
  local v major minor
  v=$(go env GOVERSION); v=${v#go}
  major=${v%%.*}; minor=${v#*.}; minor=${minor%%.*}
  if [ "$major" -lt 1 ] || { [ "$major" -eq 1 ] && [ "$minor" -lt 26 ]; }; then
    die "kube: Go >= 1.26 is needed (kwok ${KUOTA_KWOK_VERSION} and Kubernetes 1.36 require it); found go$v"
  fi
}

_kube_installed() {
  local b
  for b in "$_kube_bin"/{kube-apiserver,kube-controller-manager,kube-scheduler,kubectl} \
           "$_kube_etcd_bin/etcd" "$_kube_kwok_bin/kwok"; do
    [ -x "$b" ] || return 1
  done
}

# _kube_run_logged DESCRIPTION CMD... : run a step (CMD may be a function),
# its output appended to $_kube_logf (the build log unless set otherwise)
_kube_run_logged() {
  local what=$1 logf=${_kube_logf:-$_kube_build_log}; shift
  echo "### $(date -Is) $what: $*" >>"$logf"
  if ! "$@" >>"$logf" 2>&1; then
    tail -n 30 "$logf" >&2
    die "kube: $what failed (full log: $logf)"
  fi
}
_kube_in() { (cd "$1" && shift && "$@"); }  # _kube_in DIR CMD...

# Kubernetes: a generated wrapper module that requires k8s.io/kubernetes and
# lists the four commands as tools. k8s.io/kubernetes requires its staging
# modules (k8s.io/api, k8s.io/client-go, ...) at v0.0.0 and replaces them with
# ./staging directories, which only work inside its own repository; the wrapper
# replaces each of them with its published v0.X.Y tag instead, derived from the
# upstream go.mod. One `go build ... tool` compiles the shared packages once.
_kube_build_kube() {
  local v=$KUOTA_KUBE_VERSION dir=$KUOTA_CACHE/kube-$KUOTA_KUBE_VERSION
  local b ok=1
  for b in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
    [ -x "$dir/bin/$b" ] || ok=0
  done
  [ "$ok" = 1 ] && return 0
  case "$v" in v1.*.*) ;; *) die "kube: KUOTA_KUBE_VERSION must look like v1.N.M, got $v" ;; esac
  local staging_v=v0.${v#v1.} minor=${v#v1.}; minor=${minor%%.*}
  log "kube: building Kubernetes $v (kube-apiserver, kube-controller-manager, kube-scheduler, kubectl); the first build takes 15-30 min on 2 cores, log: $_kube_build_log"
  local t0; t0=$(date +%s)
  local src=$dir/src
  rm -rf "$src" "$dir/bin.tmp"; mkdir -p "$src" "$dir/bin.tmp"
  local json gomod
  json=$(_kube_in "$src" _kube_go mod download -json "k8s.io/kubernetes@$v") || die "kube: cannot download k8s.io/kubernetes@$v from the Go module proxy"
  gomod=$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')
  [ -f "$gomod" ] || die "kube: no go.mod for k8s.io/kubernetes@$v"
  local staging
  staging=$(awk '
    /^replace[[:space:]]*\(/ { inrep = 1; next }
    inrep && /^\)/ { inrep = 0; next }
    inrep && $2 == "=>" && $3 ~ /^\.\/staging\// { rep[$1] = 1 }
    /^require[[:space:]]*\(/ { inreq = 1; next }
    inreq && /^\)/ { inreq = 0; next }
    inreq && $2 == "v0.0.0" { req[$1] = 1 }
    END { for (m in rep) if (m in req) print m }' "$gomod" | sort)
  [ -n "$staging" ] || die "kube: found no staging modules in $gomod"
  {
    echo "// Generated by scripts/stack.d/kube.sh: builds the Kubernetes $v commands."
    echo "module kuota.local/kube-build"
    echo
    echo "go 1.26.0"
    echo
    echo "require k8s.io/kubernetes $v"
    echo
    echo "// k8s.io/kubernetes requires these at v0.0.0 and replaces them with ./staging/..."
    echo "replace ("
    local m
    for m in $staging; do printf '\t%s => %s %s\n' "$m" "$m" "$staging_v"; done
    echo ")"
    echo
    echo "tool ("
    for b in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
      printf '\tk8s.io/kubernetes/cmd/%s\n' "$b"
    done
    echo ")"
  } >"$src/go.mod"
  _kube_run_logged "go mod tidy (kubernetes $v)" _kube_in "$src" _kube_go mod tidy
  local ld="-s -w" p
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld="$ld -X $p.gitVersion=$v -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done
  _kube_run_logged "go build (kubernetes $v)" _kube_in "$src" \
    _kube_go build -p "$KUOTA_GO_BUILD_JOBS" -trimpath -ldflags "$ld" -o "$dir/bin.tmp/" tool
  rm -rf "${dir:?}/bin"; mv "$dir/bin.tmp" "$dir/bin"
  log "kube: built Kubernetes $v in $(( $(date +%s) - t0 ))s"
}

# etcd: etcd's own main module (go.etcd.io/etcd/server/v3) uses local replace
# directives, so `go install` refuses it; build our wrapper main
# (scripts/kube/etcd/main.go) in a module that requires the server at the wanted
# version. Its sibling modules (api, client, pkg) come at the versions the
# server's go.mod requires.
_kube_build_etcd() {
  local v=$KUOTA_ETCD_VERSION dir=$KUOTA_CACHE/etcd-$KUOTA_ETCD_VERSION
  [ -x "$dir/bin/etcd" ] && return 0
  log "kube: building etcd $v"
  local t0; t0=$(date +%s)
  local src=$dir/src
  rm -rf "$src" "$dir/bin.tmp"; mkdir -p "$src" "$dir/bin.tmp"
  cp "$_kube_src/etcd/main.go" "$src/main.go"
  printf '// Generated by scripts/stack.d/kube.sh: builds etcd %s.\nmodule kuota.local/etcd-build\n\ngo 1.26.0\n\nrequire go.etcd.io/etcd/server/v3 %s\n' \
    "$v" "$v" >"$src/go.mod"
  _kube_run_logged "go mod tidy (etcd $v)" _kube_in "$src" _kube_go mod tidy
  _kube_run_logged "go build (etcd $v)" _kube_in "$src" \
    _kube_go build -p "$KUOTA_GO_BUILD_JOBS" -trimpath -ldflags "-s -w" -o "$dir/bin.tmp/etcd" .
  rm -rf "${dir:?}/bin"; mv "$dir/bin.tmp" "$dir/bin"
  log "kube: built etcd $v in $(( $(date +%s) - t0 ))s"
}

# kwok has no replace directives, so a plain `go install module@version` works.
_kube_build_kwok() {
  local v=$KUOTA_KWOK_VERSION dir=$KUOTA_CACHE/kwok-$KUOTA_KWOK_VERSION
  [ -x "$dir/bin/kwok" ] && return 0
  log "kube: building kwok $v"
  local t0; t0=$(date +%s)
  rm -rf "$dir/bin.tmp"; mkdir -p "$dir/bin.tmp"
  GOBIN="$dir/bin.tmp" _kube_run_logged "go install (kwok $v)" \
    _kube_go install -p "$KUOTA_GO_BUILD_JOBS" -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$v"
  rm -rf "${dir:?}/bin"; mv "$dir/bin.tmp" "$dir/bin"
  log "kube: built kwok $v in $(( $(date +%s) - t0 ))s"
}

kube_install() {
  _kube_installed && return 0
  _kube_need_go
  apt_ensure openssl curl
  mkdir -p "$KUOTA_CACHE"
  # one builder at a time per user (parallel `stack up` in several clones)
  exec 8>"$KUOTA_CACHE/.kube-build.lock"
  if ! flock -n 8; then
    log "kube: another build holds $KUOTA_CACHE/.kube-build.lock; waiting"
    flock 8
  fi
  _kube_build_etcd
  _kube_build_kwok
  _kube_build_kube
  flock -u 8; exec 8>&-
}

# ---------------------------------------------------------------- config

# CA, apiserver serving cert, service-account key pair, admin token; made once
# and kept with the data (a restart reuses them).
_kube_pki() {
  local p=$_kube_dir/pki
  if [ -f "$p/ca.crt" ] && [ -f "$p/apiserver.crt" ] && [ -f "$p/sa.key" ] && [ -f "$p/token.csv" ]; then
    return 0
  fi
  log "kube: generating CA, certificates and admin token in $p"
  rm -rf "$p"; mkdir -p "$p"; chmod 700 "$p"
  (
    cd "$p"
    umask 077
    openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 3650 -keyout ca.key -out ca.crt \
      -subj "/CN=kuota-local-ca" \
      -addext "basicConstraints=critical,CA:TRUE" \
      -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -sha256 -keyout apiserver.key -out apiserver.csr \
      -subj "/CN=kube-apiserver" 2>/dev/null
    cat >apiserver.ext <<EOF
basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectKeyIdentifier=hash
authorityKeyIdentifier=keyid,issuer
subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local
EOF
    openssl x509 -req -sha256 -days 3650 -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
      -extfile apiserver.ext -out apiserver.crt 2>/dev/null
    openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out sa.key 2>/dev/null
    openssl pkey -in sa.key -pubout -out sa.pub 2>/dev/null
    local token; token=$(openssl rand -hex 32)
    printf '%s,kuota-admin,kuota-admin,"system:masters"\n' "$token" >token.csv.tmp
    printf 'Authorization: Bearer %s\n' "$token" >auth-header
    printf '%s\n' "$token" >token
    mv token.csv.tmp token.csv
    chmod 644 ca.crt apiserver.crt sa.pub
  ) || die "kube: certificate generation failed"
}

# Front-proxy (request-header) CA and the apiserver's client cert for it:
# controller-manager and scheduler read this CA from the
# extension-apiserver-authentication ConfigMap for delegated authentication
# (and complain every few seconds without it); the aggregator uses the client
# cert to reach aggregated APIs.
_kube_pki_front_proxy() {
  local p=$_kube_dir/pki
  [ -f "$p/front-proxy-ca.crt" ] && [ -f "$p/front-proxy-client.crt" ] && return 0
  (
    cd "$p"
    umask 077
    openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 3650 -keyout front-proxy-ca.key \
      -out front-proxy-ca.crt -subj "/CN=kuota-local-front-proxy-ca" \
      -addext "basicConstraints=critical,CA:TRUE" \
      -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -sha256 -keyout front-proxy-client.key \
      -out front-proxy-client.csr -subj "/CN=front-proxy-client" 2>/dev/null
    printf '%s\n' "basicConstraints=CA:FALSE" "keyUsage=critical,digitalSignature,keyEncipherment" \
      "extendedKeyUsage=clientAuth" "subjectKeyIdentifier=hash" "authorityKeyIdentifier=keyid,issuer" \
      >front-proxy-client.ext
    openssl x509 -req -sha256 -days 3650 -in front-proxy-client.csr -CA front-proxy-ca.crt \
      -CAkey front-proxy-ca.key -CAcreateserial -extfile front-proxy-client.ext \
      -out front-proxy-client.crt 2>/dev/null
    chmod 644 front-proxy-ca.crt front-proxy-client.crt
  ) || die "kube: front-proxy certificate generation failed"
}

_kube_kubeconfig() {
  local f=$_kube_dir/kubeconfig
  (
    umask 077
    cat >"$f.tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: kuota-local
  cluster:
    server: https://127.0.0.1:${KUOTA_APISERVER_PORT}
    certificate-authority-data: $(base64 -w0 <"$_kube_dir/pki/ca.crt")
users:
- name: kuota-admin
  user:
    token: $(cat "$_kube_dir/pki/token")
contexts:
- name: kuota-local
  context:
    cluster: kuota-local
    user: kuota-admin
current-context: kuota-local
EOF
    mv "$f.tmp" "$f"
  )
}

# DRADeviceTaintRules (beta in 1.36, off by default, as is its API
# resource.k8s.io/v1beta2, served below): ingest watches DeviceTaintRules and
# placement keeps the devices they taint out (#17), so the stack serves them
_kube_gates=("--feature-gates=DRADeviceTaintRules=true${KUOTA_KUBE_FEATURE_GATES:+,$KUOTA_KUBE_FEATURE_GATES}")

# ---------------------------------------------------------------- health

_kube_etcd_ok() { curl -fsS -m 3 "http://127.0.0.1:$KUOTA_ETCD_PORT/health" 2>/dev/null | grep -q '"health":"true"'; }
_kube_apiserver_ok() {
  [ "$(curl -fsS -m 5 --cacert "$_kube_dir/pki/ca.crt" -H "@$_kube_dir/pki/auth-header" \
        "https://127.0.0.1:$KUOTA_APISERVER_PORT/readyz" 2>/dev/null)" = ok ]
}
# controller-manager and scheduler serve /healthz with a self-signed cert
_kube_controller-manager_ok() { [ "$(curl -fsSk -m 3 "https://127.0.0.1:$KUOTA_KCM_PORT/healthz" 2>/dev/null)" = ok ]; }
_kube_scheduler_ok() { [ "$(curl -fsSk -m 3 "https://127.0.0.1:$KUOTA_SCHEDULER_PORT/healthz" 2>/dev/null)" = ok ]; }
_kube_kwok_ok() { [ "$(curl -fsS -m 3 "http://127.0.0.1:$KUOTA_KWOK_PORT/healthz" 2>/dev/null)" = ok ]; }

_kube_port_var() {
  case $1 in
    etcd) echo KUOTA_ETCD_PORT ;; apiserver) echo KUOTA_APISERVER_PORT ;;
    controller-manager) echo KUOTA_KCM_PORT ;; scheduler) echo KUOTA_SCHEDULER_PORT ;;
    kwok) echo KUOTA_KWOK_PORT ;;
  esac
}

kube_healthy() {
  local c
  for c in $_kube_procs; do
    pid_alive "kube-$c" || return 1
    "_kube_${c}_ok" || return 1
  done
}

# ---------------------------------------------------------------- run

_kube_cmd_etcd() {
  _kube_argv=("$_kube_etcd_bin/etcd" --name=kuota --data-dir="$_kube_dir/etcd" \
    --listen-client-urls="http://127.0.0.1:$KUOTA_ETCD_PORT" \
    --advertise-client-urls="http://127.0.0.1:$KUOTA_ETCD_PORT" \
    --listen-peer-urls="http://127.0.0.1:$KUOTA_ETCD_PEER_PORT" \
    --initial-advertise-peer-urls="http://127.0.0.1:$KUOTA_ETCD_PEER_PORT" \
    --initial-cluster="kuota=http://127.0.0.1:$KUOTA_ETCD_PEER_PORT" \
    --initial-cluster-state=new --log-level=warn)
}

_kube_cmd_apiserver() {
  local p=$_kube_dir/pki
  # shellcheck disable=SC2054  # Node,RBAC is one argument
  _kube_argv=("$_kube_bin/kube-apiserver" \
    --etcd-servers="http://127.0.0.1:$KUOTA_ETCD_PORT" \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$KUOTA_APISERVER_PORT" \
    --tls-cert-file="$p/apiserver.crt" --tls-private-key-file="$p/apiserver.key" \
    --client-ca-file="$p/ca.crt" --token-auth-file="$p/token.csv" \
    --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
    --service-cluster-ip-range="$_kube_service_cidr" --endpoint-reconciler-type=none \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$p/sa.pub" --service-account-signing-key-file="$p/sa.key" \
    --requestheader-client-ca-file="$p/front-proxy-ca.crt" --requestheader-allowed-names=front-proxy-client \
    --requestheader-username-headers=X-Remote-User --requestheader-group-headers=X-Remote-Group \
    --requestheader-extra-headers-prefix=X-Remote-Extra- \
    --proxy-client-cert-file="$p/front-proxy-client.crt" --proxy-client-key-file="$p/front-proxy-client.key" \
    --runtime-config=resource.k8s.io/v1beta2=true \
    --allow-privileged=true --profiling=false --cert-dir="$p" --v=1 "${_kube_gates[@]}")
}

_kube_cmd_controller-manager() {
  local p=$_kube_dir/pki k=$_kube_dir/kubeconfig
  _kube_argv=("$_kube_bin/kube-controller-manager" \
    --kubeconfig="$k" --authentication-kubeconfig="$k" --authorization-kubeconfig="$k" \
    --bind-address=127.0.0.1 --secure-port="$KUOTA_KCM_PORT" --leader-elect=false \
    --kube-api-qps="${KUOTA_KCM_API_QPS:-20}" --kube-api-burst="${KUOTA_KCM_API_BURST:-30}" \
    --controllers='*' --use-service-account-credentials=false \
    --root-ca-file="$p/ca.crt" --service-account-private-key-file="$p/sa.key" \
    --cluster-signing-cert-file="$p/ca.crt" --cluster-signing-key-file="$p/ca.key" \
    --service-cluster-ip-range="$_kube_service_cidr" --profiling=false --v=1 "${_kube_gates[@]}")
}

_kube_cmd_scheduler() {
  local k=$_kube_dir/kubeconfig
  _kube_argv=("$_kube_bin/kube-scheduler" \
    --kubeconfig="$k" --authentication-kubeconfig="$k" --authorization-kubeconfig="$k" \
    --bind-address=127.0.0.1 --secure-port="$KUOTA_SCHEDULER_PORT" --leader-elect=false \
    --profiling=false --v=1 "${_kube_gates[@]}")
}

_kube_cmd_kwok() {
  # HOME: keep a ~/.kwok/kwok.yaml of the user out (kwok loads it by default).
  # Node leases (renewed every 10s, like a kubelet) are what keeps the
  # node-lifecycle controller from marking the nodes NotReady after 50s; the
  # flag's documented default of 40 is not applied without a config object.
  _kube_argv=(env "HOME=$_kube_dir/kwok-home" "$_kube_kwok_bin/kwok" --kubeconfig="$_kube_dir/kubeconfig" \
    --config="$_kube_src/stages/node.yaml" --config="$_kube_src/stages/pod.yaml" \
    --manage-all-nodes=false --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
    --server-address="127.0.0.1:$KUOTA_KWOK_PORT" --cidr=10.246.0.0/16 --node-ip=10.255.0.1 \
    --node-lease-duration-seconds=40 --v="$KUOTA_KWOK_LOG_LEVEL")
}

# _kube_wait NAME SECONDS: until the component answers; fail fast if it died
_kube_wait() {
  local c=$1 secs=$2 deadline
  deadline=$(( $(date +%s) + secs ))
  until "_kube_${c}_ok"; do
    if ! pid_alive "kube-$c"; then
      tail -n 20 "$KUOTA_STACK_DIR/logs/kube-$c.log" >&2 || true
      die "kube: $c exited during startup (log: $KUOTA_STACK_DIR/logs/kube-$c.log)"
    fi
    [ "$(date +%s)" -lt "$deadline" ] || die "kube: $c not ready within ${secs}s (log: $KUOTA_STACK_DIR/logs/kube-$c.log)"
    sleep 0.3
  done
}

_kube_start() {
  local c=$1 secs=$2 port
  if pid_alive "kube-$c" && "_kube_${c}_ok"; then return 0; fi
  stop_pid "kube-$c"
  local var; var=$(_kube_port_var "$c"); port=${!var}
  port_open "$port" && die "kube: 127.0.0.1:$port (for $c) is in use by another process; free it or set $var"
  if [ "$c" = etcd ] && port_open "$KUOTA_ETCD_PEER_PORT"; then
    die "kube: 127.0.0.1:$KUOTA_ETCD_PEER_PORT (etcd peer) is in use; free it or set KUOTA_ETCD_PEER_PORT"
  fi
  [ "$c" = kwok ] && _kube_release_node_leases
  local -a cmd
  "_kube_cmd_$c"; cmd=("${_kube_argv[@]}")
  echo "### $(date -Is) starting: ${cmd[*]}" >>"$KUOTA_STACK_DIR/logs/kube-$c.log"
  start_bg "kube-$c" "$KUOTA_STACK_DIR/logs/kube-$c.log" "${cmd[@]}"
  _kube_wait "$c" "$secs"
  log "kube: $c up (pid $(cat "$KUOTA_STACK_DIR/run/kube-$c.pid"), 127.0.0.1:$port)"
}

_kubectl() { "$_kube_bin/kubectl" --kubeconfig="$_kube_dir/kubeconfig" "$@"; }

# kwok holds each fake node's Lease under a random per-process identity and
# does not release it on exit, so a restarted kwok would leave the nodes alone
# until the old leases expire (40s). kwok is not running when this is called.
_kube_release_node_leases() {
  local nodes
  nodes=$(_kubectl get nodes -o jsonpath='{range .items[?(@.metadata.annotations.kwok\.x-k8s\.io/node=="fake")]}{.metadata.name}{" "}{end}' 2>/dev/null) || return 0
  [ -n "$nodes" ] || return 0
  # shellcheck disable=SC2086
  _kubectl -n kube-node-lease delete lease $nodes --ignore-not-found >/dev/null 2>&1 || true
}

kube_up() {
  local t0; t0=$(date +%s)
  _kube_installed || kube_install
  mkdir -p "$_kube_dir/etcd" "$_kube_dir/kwok-home"
  chmod 700 "$_kube_dir/etcd"
  _kube_pki
  _kube_pki_front_proxy
  _kube_kubeconfig
  _kube_start etcd 60
  _kube_start apiserver 120
  _kube_start controller-manager 60
  _kube_start scheduler 60
  _kube_start kwok 60
  _kube_logf=$KUOTA_STACK_DIR/logs/kube-nodes.log _kube_run_logged "kubectl apply nodes" \
    _kubectl apply -f "$_kube_src/nodes.yaml"
  local -a nodes
  mapfile -t nodes < <(_kubectl get nodes -l type=kwok -o name)
  [ ${#nodes[@]} -gt 0 ] || die "kube: no nodes labelled type=kwok after applying $_kube_src/nodes.yaml"
  # kwok marks them Ready; the node-lifecycle controller then lifts the not-ready taint
  local deadline=$(( $(date +%s) + 60 ))
  until _kubectl wait --for=condition=Ready "${nodes[@]}" --timeout=5s >/dev/null 2>&1 \
        && [ -z "$(_kubectl get nodes -l type=kwok -o jsonpath='{.items[*].spec.taints}')" ]; do
    [ "$(date +%s)" -lt "$deadline" ] || die "kube: kwok nodes not Ready and untainted within 60s (log: $KUOTA_STACK_DIR/logs/kube-kwok.log)"
    sleep 0.5
  done
  log "kube: up in $(( $(date +%s) - t0 ))s: $(kube_address), nodes: ${nodes[*]#node/}"
}

kube_down() {
  local c
  for c in $(echo "$_kube_procs" | tr ' ' '\n' | tac); do
    if [ -f "$KUOTA_STACK_DIR/run/kube-$c.pid" ]; then
      stop_pid "kube-$c"
      log "kube: $c stopped"
    fi
  done
}

kube_address() { echo "https://127.0.0.1:$KUOTA_APISERVER_PORT"; }

_kube_bin_version() {  # BINARY: print vX.Y.Z from `BINARY --version`
  [ -x "$1" ] || { echo "not-installed"; return 0; }
  "$1" --version 2>/dev/null | grep -o 'v\{0,1\}[0-9][0-9]*\.[0-9][0-9]*\.[0-9][0-9]*[-+.a-z0-9]*' | head -n 1 | sed 's/^\([0-9]\)/v\1/'
}

kube_versions() {
  local api_v
  api_v=$(_kube_bin_version "$_kube_bin/kube-apiserver")
  if _kube_apiserver_ok; then  # what the running server says
    api_v=$(curl -fsS -m 5 --cacert "$_kube_dir/pki/ca.crt" -H "@$_kube_dir/pki/auth-header" \
      "https://127.0.0.1:$KUOTA_APISERVER_PORT/version" | sed -n 's/.*"gitVersion": *"\([^"]*\)".*/\1/p')
  fi
  echo "etcd $(_kube_bin_version "$_kube_etcd_bin/etcd") 127.0.0.1:$KUOTA_ETCD_PORT"
  echo "kube-apiserver $api_v $(kube_address)"
  echo "kube-controller-manager $(_kube_bin_version "$_kube_bin/kube-controller-manager") https://127.0.0.1:$KUOTA_KCM_PORT"
  echo "kube-scheduler $(_kube_bin_version "$_kube_bin/kube-scheduler") https://127.0.0.1:$KUOTA_SCHEDULER_PORT"
  echo "kwok $(_kube_bin_version "$_kube_kwok_bin/kwok") http://127.0.0.1:$KUOTA_KWOK_PORT"
  local kc_v=not-installed
  [ -x "$_kube_bin/kubectl" ] && kc_v=$("$_kube_bin/kubectl" version --client 2>/dev/null | sed -n 's/^Client Version: //p')
  echo "kubectl $kc_v $_kube_bin/kubectl"
}

kube_env() {
  echo "export KUBECONFIG=$_kube_dir/kubeconfig"
  echo "export KUOTA_KUBE_APISERVER=$(kube_address)"
  echo "export KUOTA_KUBE_VERSION=$KUOTA_KUBE_VERSION"
  echo "export KUOTA_KUBECTL=$_kube_bin/kubectl"
}
