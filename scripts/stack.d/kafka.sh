# Apache Kafka for the local stack: one KRaft node acting as broker and
# controller, on 127.0.0.1. The broker jars come from Maven Central
# (org.apache.kafka:kafka_2.13 and its runtime dependencies, resolved with
# scripts/kafka/pom.xml) into $KUOTA_CACHE/kafka-<version>/libs; nothing is
# downloaded from apache.org and no distribution tarball is used.
#
#   KUOTA_KAFKA_VERSION          Kafka release (default below; must be 4.x)
#   KUOTA_KAFKA_PORT             client listener (PLAINTEXT), default 19092
#   KUOTA_KAFKA_CONTROLLER_PORT  KRaft controller listener, default 19093
#   KUOTA_KAFKA_SSL_PORT         SSL listener with mTLS (client certificate
#                                required), default KUOTA_KAFKA_PORT+2; 0: none
#   KUOTA_KAFKA_SASL_PORT        SASL_SSL listener, SCRAM-SHA-512, default
#                                KUOTA_KAFKA_PORT+3; 0: none
#   KUOTA_KAFKA_SCRAM_USER       the SCRAM user created for kuota (default kuota)
#   KUOTA_KAFKA_JVM_OPTS         replaces the default JVM options
#
# State: $KUOTA_STACK_DIR/kafka/{server.properties,data/,cluster-id,version},
# the dev CA and certificates in kafka/tls/ (made with openssl on first use),
# the SCRAM password in kafka/scram-password; log: $KUOTA_STACK_DIR/logs/kafka.log.
# The PLAINTEXT listener is what everything uses by default; the SSL and
# SASL_SSL listeners are extra (docs/security.md, tests/integration/test_security_*).
# With them comes Kafka's StandardAuthorizer, open where no ACL exists and with
# PLAINTEXT (ANONYMOUS) as super user, so that tests can check kuota's ACLs.

: "${KUOTA_KAFKA_VERSION:=4.4.0}"
: "${KUOTA_KAFKA_PORT:=19092}"
: "${KUOTA_KAFKA_CONTROLLER_PORT:=19093}"
: "${KUOTA_KAFKA_SSL_PORT:=$((KUOTA_KAFKA_PORT + 2))}"
: "${KUOTA_KAFKA_SASL_PORT:=$((KUOTA_KAFKA_PORT + 3))}"
: "${KUOTA_KAFKA_SCRAM_USER:=kuota}"
# Small heap, serial GC and C1-only JIT: a local single-node broker idles at a
# few hundred MB of RSS and starts in seconds on a busy 2-core machine.
: "${KUOTA_KAFKA_JVM_OPTS:=-Xms64m -Xmx512m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=64m -XX:+ExitOnOutOfMemoryError -XX:+PerfDisableSharedMem -Djava.awt.headless=true}"

kafka_home() { echo "$KUOTA_CACHE/kafka-$KUOTA_KAFKA_VERSION"; }
kafka_dir() { echo "$KUOTA_STACK_DIR/kafka"; }

kafka__python() {
  if [ -x /usr/bin/python3 ]; then /usr/bin/python3 "$@"; else python3 "$@"; fi
}

# kafka__mvn ARGS... : Maven against our POM, local repository inside the cache.
kafka__mvn() {
  mvn -q -B --no-transfer-progress -Dstyle.color=never \
    -f "$KUOTA_ROOT/scripts/kafka/pom.xml" \
    -Dmaven.repo.local="$KUOTA_CACHE/m2" \
    -Dkafka.version="$KUOTA_KAFKA_VERSION" "$@"
}

# kafka__jar_version LIBS PREFIX : version part of LIBS/PREFIX-<version>.jar
kafka__jar_version() {
  local f
  f=$(find "$1" -maxdepth 1 -name "$2-[0-9]*.jar" | sort | tail -n 1)
  [ -n "$f" ] || return 1
  f=${f##*/}; f=${f#"$2-"}; echo "${f%.jar}"
}

kafka_install() {
  local home tmp libs slf4j log4j binding
  home=$(kafka_home)
  [ -f "$home/.complete" ] && return 0
  case "$KUOTA_KAFKA_VERSION" in 4.*) ;; *) die "kafka: KUOTA_KAFKA_VERSION=$KUOTA_KAFKA_VERSION is not a 4.x release" ;; esac
  command -v java >/dev/null || die "kafka: java not found (Kafka 4.x needs Java 17+)"
  command -v mvn >/dev/null || die "kafka: mvn not found (needed to resolve the Kafka jars)"
  local jmajor
  jmajor=$(java -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p')
  [ "${jmajor%%.*}" -ge 17 ] 2>/dev/null || die "kafka: Java $jmajor found, Kafka 4.x needs 17+"

  log "kafka: resolving org.apache.kafka:kafka_2.13:$KUOTA_KAFKA_VERSION from Maven Central into $home"
  tmp="$home.tmp.$$"
  rm -rf "$tmp"; mkdir -p "$tmp/libs"; libs="$tmp/libs"
  kafka__mvn dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$libs" \
    || { rm -rf "$tmp"; die "kafka: Maven could not resolve kafka_2.13:$KUOTA_KAFKA_VERSION"; }
  [ -f "$libs/kafka_2.13-$KUOTA_KAFKA_VERSION.jar" ] || { rm -rf "$tmp"; die "kafka: kafka_2.13-$KUOTA_KAFKA_VERSION.jar missing after resolution"; }

  # Kafka's POM brings slf4j-api and log4j-core but no binding between them:
  # add the log4j2 SLF4J binding matching both resolved versions.
  slf4j=$(kafka__jar_version "$libs" slf4j-api) || { rm -rf "$tmp"; die "kafka: slf4j-api not in the resolved classpath"; }
  log4j=$(kafka__jar_version "$libs" log4j-core) || { rm -rf "$tmp"; die "kafka: log4j-core not in the resolved classpath"; }
  case "$slf4j" in 1.*) binding="log4j-slf4j-impl" ;; *) binding="log4j-slf4j2-impl" ;; esac
  kafka__mvn dependency:copy -Dartifact="org.apache.logging.log4j:$binding:$log4j" -DoutputDirectory="$libs" \
    || { rm -rf "$tmp"; die "kafka: could not resolve $binding:$log4j"; }

  {
    echo "kafka=$KUOTA_KAFKA_VERSION"
    echo "slf4j-api=$slf4j"
    echo "log4j-core=$log4j"
    echo "slf4j-binding=$binding:$log4j"
  } >"$tmp/resolved.properties"
  touch "$tmp/.complete"
  rm -rf "$home"; mv "$tmp" "$home"
  log "kafka: installed $KUOTA_KAFKA_VERSION ($(find "$home/libs" -name '*.jar' | wc -l) jars; slf4j $slf4j -> $binding $log4j)"
}

kafka_tls_dir() { echo "$(kafka_dir)/tls"; }

# kafka__tls: a dev CA, the broker's certificate (127.0.0.1 / localhost) and a
# client certificate for mTLS, made once per stack dir (stack_certs, common.sh).
kafka__tls() { stack_certs "$(kafka_tls_dir)" kafka; }

kafka__scram_password_file() { echo "$(kafka_dir)/scram-password"; }

kafka__secure() { [ "$KUOTA_KAFKA_SSL_PORT" != 0 ] || [ "$KUOTA_KAFKA_SASL_PORT" != 0 ]; }

# kafka__listener_config: the listener lines of server.properties. PLAINTEXT
# and CONTROLLER as always; SSL (mTLS) and SASL_SSL (SCRAM) added to them.
kafka__listener_config() {
  local t listeners="PLAINTEXT://127.0.0.1:$KUOTA_KAFKA_PORT,CONTROLLER://127.0.0.1:$KUOTA_KAFKA_CONTROLLER_PORT"
  local advertised="PLAINTEXT://127.0.0.1:$KUOTA_KAFKA_PORT" map="PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
  t=$(kafka_tls_dir)
  if [ "$KUOTA_KAFKA_SSL_PORT" != 0 ]; then
    listeners+=",SSL://127.0.0.1:$KUOTA_KAFKA_SSL_PORT"; advertised+=",SSL://127.0.0.1:$KUOTA_KAFKA_SSL_PORT"; map+=",SSL:SSL"
  fi
  if [ "$KUOTA_KAFKA_SASL_PORT" != 0 ]; then
    listeners+=",SASL_SSL://127.0.0.1:$KUOTA_KAFKA_SASL_PORT"; advertised+=",SASL_SSL://127.0.0.1:$KUOTA_KAFKA_SASL_PORT"; map+=",SASL_SSL:SASL_SSL"
  fi
  echo "listeners=$listeners"
  echo "advertised.listeners=$advertised"
  echo "listener.security.protocol.map=$map"
  kafka__secure || return 0
  cat <<EOF
# TLS of the SSL and SASL_SSL listeners (PEM files in kafka/tls/)
ssl.keystore.type=PEM
ssl.keystore.location=$t/server.pem
ssl.truststore.type=PEM
ssl.truststore.location=$t/ca.crt
# SSL listener: mutual TLS, a client certificate signed by the dev CA is required
listener.name.ssl.ssl.client.auth=required
# SASL_SSL listener: SCRAM-SHA-512 users (scripts/kafka/kafka_scram.py adds kuota's)
listener.name.sasl_ssl.sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
# ACLs are enforced only where some exist (tests/integration/test_security_kafka_acls.py
# makes them for its own prefix); PLAINTEXT clients (and the controller link)
# are ANONYMOUS and super users, so everything else works as without an authorizer.
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
allow.everyone.if.no.acl.found=true
super.users=User:ANONYMOUS
EOF
}

kafka__write_config() {
  local d; d=$(kafka_dir)
  mkdir -p "$d/data"
  cat >"$d/server.properties.tmp" <<EOF
# written by scripts/stack.d/kafka.sh on every start; edits are overwritten
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$KUOTA_KAFKA_CONTROLLER_PORT
$(kafka__listener_config)
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
log.dirs=$d/data

# single node: every internal topic has one replica
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
default.replication.factor=1
min.insync.replicas=1
# fewer internal partitions than the default 50: faster first use, less memory
offsets.topic.num.partitions=4
transaction.state.log.num.partitions=4

# the log cleaner (needed for the compacted internal topics) keeps its dedupe
# map on the heap: 128 MiB by default, 16 MiB is plenty for a local broker
log.cleaner.dedupe.buffer.size=16777216

num.partitions=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=true
num.network.threads=2
num.io.threads=4
num.recovery.threads.per.data.dir=1
EOF
  mv "$d/server.properties.tmp" "$d/server.properties"
}

# kafka__jvm_args: JVM options and classpath, one per line
kafka__jvm_args() {
  local opts
  read -ra opts <<<"$KUOTA_KAFKA_JVM_OPTS"
  printf '%s\n' "${opts[@]}" \
    "-Dlog4j2.configurationFile=$KUOTA_ROOT/scripts/kafka/log4j2.properties" \
    "-Dkafka.logs.dir=$KUOTA_STACK_DIR/logs" \
    -cp "$(kafka_home)/libs/*"
}

kafka__java() {
  local args
  mapfile -t args < <(kafka__jvm_args)
  java "${args[@]}" "$@"
}

kafka__format() {
  local d cid logf
  d=$(kafka_dir); logf="$KUOTA_STACK_DIR/logs/kafka.log"
  [ -f "$d/data/meta.properties" ] && return 0
  cid=$(kafka__java kafka.tools.StorageTool random-uuid 2>>"$logf" | tail -n 1)
  [ -n "$cid" ] || die "kafka: StorageTool random-uuid failed (see $logf)"
  log "kafka: formatting $d/data (cluster id $cid)"
  kafka__java kafka.tools.StorageTool format -t "$cid" -c "$d/server.properties" >>"$logf" 2>&1 \
    || die "kafka: StorageTool format failed (see $logf)"
  echo "$cid" >"$d/cluster-id"
}

kafka__answers() { kafka__python "$KUOTA_ROOT/scripts/kafka/kafka_probe.py" "127.0.0.1:$KUOTA_KAFKA_PORT"; }

kafka_healthy() { pid_alive kafka && kafka__answers; }

kafka_up() {
  local d logf t0 deadline jvm
  d=$(kafka_dir); logf="$KUOTA_STACK_DIR/logs/kafka.log"
  t0=$(date +%s)
  if pid_alive kafka; then
    log "kafka: process $(cat "$KUOTA_STACK_DIR/run/kafka.pid") running but not answering yet; waiting"
  else
    if port_open "$KUOTA_KAFKA_PORT" || port_open "$KUOTA_KAFKA_CONTROLLER_PORT"; then
      die "kafka: port $KUOTA_KAFKA_PORT or $KUOTA_KAFKA_CONTROLLER_PORT is taken by a process this stack did not start"
    fi
    for p in "$KUOTA_KAFKA_SSL_PORT" "$KUOTA_KAFKA_SASL_PORT"; do
      if [ "$p" != 0 ] && port_open "$p"; then
        die "kafka: port $p (KUOTA_KAFKA_SSL_PORT / KUOTA_KAFKA_SASL_PORT; 0 turns a listener off) is taken by a process this stack did not start"
      fi
    done
    if kafka__secure; then kafka__tls; fi
    kafka__write_config
    kafka__format
    log "kafka: starting $KUOTA_KAFKA_VERSION on 127.0.0.1:$KUOTA_KAFKA_PORT"
    echo "--- $(date -Is) start kafka $KUOTA_KAFKA_VERSION" >>"$logf"
    mapfile -t jvm < <(kafka__jvm_args)
    start_bg kafka "$logf" java "${jvm[@]}" kafka.Kafka "$d/server.properties"
  fi
  deadline=$(( t0 + ${KUOTA_KAFKA_START_TIMEOUT:-180} ))
  until kafka__answers; do
    if ! pid_alive kafka; then
      tail -n 30 "$logf" >&2
      die "kafka: the broker exited during startup (log: $logf)"
    fi
    [ "$(date +%s)" -lt "$deadline" ] || die "kafka: not answering after ${KUOTA_KAFKA_START_TIMEOUT:-180}s (log: $logf)"
    sleep 0.5
  done
  # Up means a group and a transaction coordinator too (kafka_probe.py --coordinators):
  # the first client to find one on a new broker otherwise meets error 15.
  until kafka__python "$KUOTA_ROOT/scripts/kafka/kafka_probe.py" --coordinators "127.0.0.1:$KUOTA_KAFKA_PORT"; do
    pid_alive kafka || die "kafka: the broker exited during startup (log: $logf)"
    [ "$(date +%s)" -lt "$deadline" ] || die "kafka: no group/transaction coordinator after ${KUOTA_KAFKA_START_TIMEOUT:-180}s (log: $logf)"
    sleep 0.5
  done
  kafka__scram_user
  echo "$KUOTA_KAFKA_VERSION" >"$d/version"
  log "kafka: up after $(( $(date +%s) - t0 ))s"
}

# kafka__scram_user: create (or update) the dev SCRAM user over the PLAINTEXT
# listener once the broker answers: works on logs formatted before the stack
# had users (format --add-scram only applies to a fresh log).
kafka__scram_user() {
  local pw i; pw=$(kafka__scram_password_file)
  [ "$KUOTA_KAFKA_SASL_PORT" != 0 ] || return 0
  if [ ! -s "$pw" ]; then
    (umask 077; kafka__python -c 'import secrets; print(secrets.token_hex(16))' >"$pw")
  fi
  for i in $(seq 1 20); do
    kafka__python "$KUOTA_ROOT/scripts/kafka/kafka_scram.py" "127.0.0.1:$KUOTA_KAFKA_PORT" \
      "$KUOTA_KAFKA_SCRAM_USER" "$pw" 2>>"$KUOTA_STACK_DIR/logs/kafka.log" && return 0
    sleep 0.5
  done
  # Not fatal: everything but the SASL_SSL listener works without the user.
  log "kafka: WARNING: could not create the SCRAM user $KUOTA_KAFKA_SCRAM_USER; the SASL_SSL listener will refuse it (see $KUOTA_STACK_DIR/logs/kafka.log)"
}

# kafka__running PID: exists and is not a zombie (our daemons are orphans, and
# the init here reaps them a second or two late; kill -0 succeeds on zombies)
kafka__running() {
  local st
  st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null) && [ "${st%% *}" != Z ]
}

kafka_down() {
  local f="$KUOTA_STACK_DIR/run/kafka.pid" pid
  if pid_alive kafka; then
    pid=$(cat "$f")
    # a clean shutdown (controlled shutdown + log flush) avoids log recovery on the next start
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 600); do kafka__running "$pid" || break; sleep 0.1; done
    if kafka__running "$pid"; then
      log "kafka: no clean exit within 60s, killing"
    else
      rm -f "$f"
    fi
  fi
  stop_pid kafka
  rm -f "$(kafka_dir)/version"
  log "kafka: down"
}

kafka_address() { echo "127.0.0.1:$KUOTA_KAFKA_PORT"; }

kafka_versions() {
  local v f
  f="$(kafka_dir)/version"
  if [ -f "$f" ] && pid_alive kafka; then v=$(cat "$f"); else v="$KUOTA_KAFKA_VERSION (not running)"; fi
  echo "kafka $v $(kafka_address)"
}

# The extra listeners' addresses and the dev credentials go in stack.env under
# names no kuota client reads (tests/integration/test_security_* use them), so
# everything else keeps using the PLAINTEXT listener.
kafka_env() {
  local t; t=$(kafka_tls_dir)
  echo "export KUOTA_KAFKA_BOOTSTRAP=$(kafka_address)"
  kafka__secure || return 0
  if pid_alive kafka && ! grep -q "^listener.name.ssl" "$(kafka_dir)/server.properties" 2>/dev/null; then
    log "kafka: the running broker was started without the SSL/SASL_SSL listeners (an older scripts/stack); to add them: scripts/stack down kafka && scripts/stack up kafka"
  fi
  echo "export KUOTA_KAFKA_STACK_CA_FILE=$t/ca.crt"
  if [ "$KUOTA_KAFKA_SSL_PORT" != 0 ]; then
    echo "export KUOTA_KAFKA_SSL_BOOTSTRAP=127.0.0.1:$KUOTA_KAFKA_SSL_PORT"
    echo "export KUOTA_KAFKA_STACK_CLIENT_CERT_FILE=$t/client.crt"
    echo "export KUOTA_KAFKA_STACK_CLIENT_KEY_FILE=$t/client.key"
  fi
  if [ "$KUOTA_KAFKA_SASL_PORT" != 0 ]; then
    echo "export KUOTA_KAFKA_SASL_BOOTSTRAP=127.0.0.1:$KUOTA_KAFKA_SASL_PORT"
    echo "export KUOTA_KAFKA_STACK_SCRAM_USERNAME=$KUOTA_KAFKA_SCRAM_USER"
    if [ -s "$(kafka__scram_password_file)" ]; then
      echo "export KUOTA_KAFKA_STACK_SCRAM_PASSWORD=$(cat "$(kafka__scram_password_file)")"
    fi
  fi
}
