# Redis for the local stack: Debian's redis-server binary, run by us with our
# own config on 127.0.0.1 (the distribution's system service, if any, is left
# alone; we never touch /etc/redis or the default port).
#
#   KUOTA_REDIS_PORT        default 16379
#   KUOTA_REDIS_TLS_PORT    TLS port (dev CA in redis/tls; client certificates
#                           verified when given), default KUOTA_REDIS_PORT+1;
#                           0: none
#   KUOTA_REDIS_ACL_USER    an ACL user with only what kuota needs (default
#                           kuota; its password: redis/acl-password). The
#                           default user stays open (no password) for tests.
#
# The HMAC keys of what kuota keeps here (KUOTA_SNAPSHOT_KEY, KUOTA_SEEN_KEY:
# the services refuse to start without them) are made once per stack dir, in
# redis/snapshot-key and redis/seen-key, and exported in stack.env.
#
# State: $KUOTA_STACK_DIR/redis/{redis.conf,appendonlydir/}, log:
# $KUOTA_STACK_DIR/logs/redis.log. Persistence is a small AOF (fsync every
# second, no RDB snapshots) so data survives `stack down` / `stack up`.

: "${KUOTA_REDIS_PORT:=16379}"
: "${KUOTA_REDIS_ACL_USER:=kuota}"
: "${KUOTA_REDIS_TLS_PORT:=$((KUOTA_REDIS_PORT + 1))}"
# The rules kuota's ACL user gets (docs/security.md): its keys only, and only
# the commands kuota sends (HSET/HGETALL/HDEL/DEL on kuota:* keys, PING, SELECT).
REDIS_KUOTA_ACL_RULES="resetkeys ~kuota:* resetchannels -@all +ping +select +hset +hgetall +hdel +del"

redis_dir() { echo "$KUOTA_STACK_DIR/redis"; }

redis_install() {
  command -v redis-server >/dev/null && command -v redis-cli >/dev/null && return 0
  apt_ensure redis-server
  command -v redis-server >/dev/null || die "redis: redis-server still missing after apt-get"
}

redis__write_config() {
  local d; d=$(redis_dir)
  mkdir -p "$d"
  cat >"$d/redis.conf.tmp" <<EOF
# written by scripts/stack.d/redis.sh on every start; edits are overwritten
bind 127.0.0.1
port $KUOTA_REDIS_PORT
protected-mode yes
daemonize no
supervised no
logfile ""
loglevel notice
dir $d
save ""
appendonly yes
appendfilename "appendonly.aof"
appenddirname "appendonlydir"
appendfsync everysec
auto-aof-rewrite-percentage 100
auto-aof-rewrite-min-size 16mb
maxmemory 256mb
maxmemory-policy noeviction
databases 16
user $KUOTA_REDIS_ACL_USER on >$(cat "$(redis__acl_password_file)") $REDIS_KUOTA_ACL_RULES
EOF
  if [ "$KUOTA_REDIS_TLS_PORT" != 0 ]; then
    redis__tls_settings | sed 's/^/tls-/' | tr '=' ' ' >>"$d/redis.conf.tmp"
  fi
  mv "$d/redis.conf.tmp" "$d/redis.conf"
}

redis_tls_dir() { echo "$(redis_dir)/tls"; }

# redis__tls_settings: the TLS settings as name=value lines, without the
# "tls-" prefix (redis.conf lines, or CONFIG SET on an older running server)
redis__tls_settings() {
  local t; t=$(redis_tls_dir)
  printf '%s\n' "cert-file=$t/server.crt" "key-file=$t/server.key" "ca-cert-file=$t/ca.crt" \
    "auth-clients=optional" "port=$KUOTA_REDIS_TLS_PORT"
}

# A server started by an older scripts/stack has no TLS port: Redis 7 takes the
# TLS settings at runtime (CONFIG SET; the port last, once the files are set).
redis__tls_apply() {
  local kv
  stack_certs "$(redis_tls_dir)" redis
  while IFS= read -r kv; do
    [ "$(redis-cli -h 127.0.0.1 -p "$KUOTA_REDIS_PORT" CONFIG SET "tls-${kv%%=*}" "${kv#*=}" 2>&1)" = OK ] \
      || { log "redis: CONFIG SET tls-${kv%%=*} failed; restart Redis for its TLS port: scripts/stack down redis && scripts/stack up redis"; return 0; }
  done < <(redis__tls_settings)
  log "redis: TLS port $KUOTA_REDIS_TLS_PORT opened on the running server"
}

redis__acl_password_file() { echo "$(redis_dir)/acl-password"; }

# redis__signing_key FILE: a random HMAC key, made once (scripts/kuota-services
# makes the same files when an older stack.env lacks the keys)
redis__signing_key() {
  local f="$(redis_dir)/$1"
  mkdir -p "$(redis_dir)"
  if [ ! -s "$f" ]; then
    (umask 077; od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$f.tmp" && mv "$f.tmp" "$f")
  fi
  cat "$f"
}

redis__acl_password() {
  local f; f=$(redis__acl_password_file)
  mkdir -p "$(redis_dir)"
  if [ ! -s "$f" ]; then
    (umask 077; od -An -N16 -tx1 /dev/urandom | tr -d ' \n' >"$f")
  fi
}

# The ACL user, also on a server started by an older scripts/stack (its config
# has no `user` line): ACL SETUSER is idempotent and needs no restart.
redis__acl_apply() {
  local rules
  read -ra rules <<<"$REDIS_KUOTA_ACL_RULES"
  [ "$(redis-cli -h 127.0.0.1 -p "$KUOTA_REDIS_PORT" ACL SETUSER "$KUOTA_REDIS_ACL_USER" reset on \
    ">$(cat "$(redis__acl_password_file)")" "${rules[@]}" 2>&1)" = OK ] \
    || die "redis: ACL SETUSER $KUOTA_REDIS_ACL_USER failed"
}

redis__acl_present() {
  [ -s "$(redis__acl_password_file)" ] \
    && [ -n "$(redis-cli -h 127.0.0.1 -p "$KUOTA_REDIS_PORT" ACL GETUSER "$KUOTA_REDIS_ACL_USER" 2>/dev/null)" ]
}

redis__answers() {
  [ "$(redis-cli -h 127.0.0.1 -p "$KUOTA_REDIS_PORT" ping 2>/dev/null)" = PONG ]
}

redis_healthy() { pid_alive redis && redis__answers; }

redis_up() {
  local d logf t0 deadline
  d=$(redis_dir); logf="$KUOTA_STACK_DIR/logs/redis.log"
  t0=$(date +%s)
  redis__acl_password
  if ! pid_alive redis; then
    port_open "$KUOTA_REDIS_PORT" \
      && die "redis: port $KUOTA_REDIS_PORT is taken by a process this stack did not start"
    if [ "$KUOTA_REDIS_TLS_PORT" != 0 ]; then
      port_open "$KUOTA_REDIS_TLS_PORT" \
        && die "redis: port $KUOTA_REDIS_TLS_PORT (KUOTA_REDIS_TLS_PORT; 0: no TLS) is taken by a process this stack did not start"
      stack_certs "$(redis_tls_dir)" redis
    fi
    redis__write_config
    log "redis: starting $(redis__version) on 127.0.0.1:$KUOTA_REDIS_PORT"
    start_bg redis "$logf" redis-server "$d/redis.conf"
  fi
  deadline=$(( t0 + 30 ))
  until redis__answers; do
    if ! pid_alive redis; then
      tail -n 20 "$logf" >&2
      die "redis: redis-server exited during startup (log: $logf)"
    fi
    [ "$(date +%s)" -lt "$deadline" ] || die "redis: not answering after 30s (log: $logf)"
    sleep 0.2
  done
  redis__acl_apply
  log "redis: up after $(( $(date +%s) - t0 ))s"
}

redis_down() {
  local f="$KUOTA_STACK_DIR/run/redis.pid" pid st=""
  if pid_alive redis; then
    pid=$(cat "$f")
    # SIGTERM makes redis-server fsync the AOF and exit cleanly. Stop waiting
    # once it is a zombie: the init here reaps orphans a second or two late.
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do
      st=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null) || break
      [ "${st%% *}" = Z ] && break
      sleep 0.1
    done
    [ "${st%% *}" = Z ] || [ ! -e "/proc/$pid" ] && rm -f "$f"
  fi
  stop_pid redis
  log "redis: down"
}

redis_address() { echo "127.0.0.1:$KUOTA_REDIS_PORT"; }

# "Redis server v=7.0.15 sha=..." -> 7.0.15
redis__version() { redis-server --version 2>/dev/null | sed -n 's/.* v=\([^ ]*\).*/\1/p'; }

redis_versions() { echo "redis $(redis__version) $(redis_address)"; }

# The ACL user's name and password go in stack.env under names kuota's clients
# do not read (tests/integration/test_security_redis.py uses them): everything
# else keeps using the default user.
redis_env() {
  echo "export KUOTA_REDIS_URL=redis://$(redis_address)/0"
  echo "export KUOTA_SNAPSHOT_KEY=$(redis__signing_key snapshot-key)"
  echo "export KUOTA_SEEN_KEY=$(redis__signing_key seen-key)"
  # `up` skips a healthy server: one started by an older scripts/stack gets the
  # ACL user here (idempotent, no restart).
  if pid_alive redis && redis__answers && ! redis__acl_present; then
    redis__acl_password
    redis__acl_apply
    log "redis: added the ACL user $KUOTA_REDIS_ACL_USER to the running server"
  fi
  if [ "$KUOTA_REDIS_TLS_PORT" != 0 ] && pid_alive redis && redis__answers \
    && [ "$(redis-cli -h 127.0.0.1 -p "$KUOTA_REDIS_PORT" CONFIG GET tls-port 2>/dev/null | tail -n 1)" != "$KUOTA_REDIS_TLS_PORT" ]; then
    redis__tls_apply
  fi
  if [ "$KUOTA_REDIS_TLS_PORT" != 0 ] && [ -f "$(redis_tls_dir)/.complete" ]; then
    local t; t=$(redis_tls_dir)
    echo "export KUOTA_REDIS_TLS_URL=rediss://127.0.0.1:$KUOTA_REDIS_TLS_PORT/0"
    echo "export KUOTA_REDIS_STACK_CA_FILE=$t/ca.crt"
    echo "export KUOTA_REDIS_STACK_CLIENT_CERT_FILE=$t/client.crt"
    echo "export KUOTA_REDIS_STACK_CLIENT_KEY_FILE=$t/client.key"
  fi
  if [ -s "$(redis__acl_password_file)" ]; then
    echo "export KUOTA_REDIS_STACK_USERNAME=$KUOTA_REDIS_ACL_USER"
    echo "export KUOTA_REDIS_STACK_PASSWORD=$(cat "$(redis__acl_password_file)")"
  fi
}
