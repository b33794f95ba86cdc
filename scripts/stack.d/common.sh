# Shared helpers for scripts/stack and its components. Each component file
# stack.d/<c>.sh defines: <c>_install <c>_up <c>_down <c>_healthy <c>_address
# <c>_versions <c>_env (prints `export VAR=value` lines for stack.env).
: "${KUOTA_ROOT:=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
: "${KUOTA_CACHE:=$HOME/.cache/kuota}"
: "${KUOTA_STACK_DIR:=$KUOTA_ROOT/.stack}"
: "${KUOTA_COMPONENTS:=redis kafka kube}"
export KUOTA_ROOT KUOTA_CACHE KUOTA_STACK_DIR
mkdir -p "$KUOTA_CACHE" "$KUOTA_STACK_DIR/logs" "$KUOTA_STACK_DIR/run"
# Components started on this stack beyond KUOTA_COMPONENTS (`scripts/stack up
# training kuberay`) are remembered in $KUOTA_STACK_DIR/components, one a line,
# so that a later `up`, `down`, `status` or `env` without arguments covers them
# too; `down COMPONENT` forgets it again.
_stack_extras=$KUOTA_STACK_DIR/components
if [ -f "$_stack_extras" ]; then
  for _c in $(cat "$_stack_extras"); do
    case " $KUOTA_COMPONENTS " in *" $_c "*) ;; *) KUOTA_COMPONENTS="$KUOTA_COMPONENTS $_c" ;; esac
  done
  unset _c
fi

log() { printf '[stack %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# start_bg NAME LOGFILE CMD... : start a daemon, record its pid in run/NAME.pid
start_bg() {
  local name=$1 logf=$2; shift 2
  nohup setsid "$@" >>"$logf" 2>&1 </dev/null &
  echo $! >"$KUOTA_STACK_DIR/run/$name.pid"
}
# A process that exited but was not yet reaped (a zombie: our daemons are
# orphans, and init reaps them a second or two later) counts as gone.
proc_running() {
  local st
  kill -0 "$1" 2>/dev/null || return 1
  st=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
  [ "$st" != "Z" ]
}
pid_alive() { local f="$KUOTA_STACK_DIR/run/$1.pid"; [ -f "$f" ] && proc_running "$(cat "$f")"; }
stop_pid() {
  local name=$1 f="$KUOTA_STACK_DIR/run/$1.pid" pid i
  [ -f "$f" ] || return 0
  pid=$(cat "$f")
  if proc_running "$pid"; then
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 1 100); do proc_running "$pid" || break; sleep 0.1; done
    kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}
# wait_for SECONDS DESCRIPTION CMD... : poll until CMD succeeds
wait_for() {
  local secs=$1 what=$2; shift 2
  local deadline=$(( $(date +%s) + secs ))
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$deadline" ] || die "$what did not become ready within ${secs}s (see $KUOTA_STACK_DIR/logs)"
    sleep 0.5
  done
}
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# apt_ensure PKG... : install Debian packages if their binaries are missing.
apt_ensure() {
  local missing=()
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "apt-get install ${missing[*]}"
  local sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}

# stack_certs DIR COMPONENT : a dev CA, a server certificate for 127.0.0.1 and
# localhost and a client certificate (for mutual TLS), with openssl, once per
# DIR: ca.crt ca.key server.crt server.key server.pem (key + chain, Kafka's PEM
# keystore) client.crt client.key. Its output goes to logs/COMPONENT.log.
stack_certs() {
  local t=$1 c=$2
  [ -f "$t/.complete" ] && return 0
  command -v openssl >/dev/null || die "$c: openssl not found (needed for its TLS listener)"
  rm -rf "$t"; mkdir -p "$t"
  (
    set -e
    cd "$t"
    umask 077
    ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
    openssl req -x509 "${ec[@]}" -keyout ca.key -out ca.crt -days 3650 -sha256 \
      -subj "/CN=kuota local stack CA ($c)" \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
    printf '%s\n' "basicConstraints=critical,CA:FALSE" "keyUsage=critical,digitalSignature" \
      "extendedKeyUsage=serverAuth" "subjectAltName=IP:127.0.0.1,DNS:localhost" \
      "subjectKeyIdentifier=hash" "authorityKeyIdentifier=keyid" >server.ext
    printf '%s\n' "basicConstraints=critical,CA:FALSE" "keyUsage=critical,digitalSignature" \
      "extendedKeyUsage=clientAuth" "subjectKeyIdentifier=hash" "authorityKeyIdentifier=keyid" >client.ext
    for who in server client; do
      openssl req "${ec[@]}" -keyout "$who.key" -out "$who.csr" -subj "/CN=kuota-stack-$who"
      openssl x509 -req -in "$who.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
        -sha256 -extfile "$who.ext" -out "$who.crt"
    done
    cat server.key server.crt ca.crt >server.pem
    chmod 644 ca.crt client.crt
    rm -f ./*.csr ./*.ext ca.srl
  ) >>"$KUOTA_STACK_DIR/logs/$c.log" 2>&1 || { rm -rf "$t"; die "$c: openssl failed making the dev certificates (see $KUOTA_STACK_DIR/logs/$c.log)"; }
  touch "$t/.complete"
  log "$c: made a dev CA and certificates in $t"
}

write_env() {
  local f="$KUOTA_STACK_DIR/stack.env"
  {
    echo "# written by scripts/stack; source it to reach the local stack"
    echo "export KUOTA_STACK_DIR=$KUOTA_STACK_DIR"
    for c in $KUOTA_COMPONENTS; do "${c}_env"; done
  } >"$f.tmp"
  mv "$f.tmp" "$f"
}
