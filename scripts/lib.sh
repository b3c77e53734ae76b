# shellcheck shell=bash
# Shared set-up for scripts/up and scripts/test: makes sure the machine has what
# crawlfleet needs (Chromium + chromedriver, Postgres, Redis, the client tools) and
# that Postgres and Redis answer at DATABASE_URL and REDIS_URL.
#
# Source it; do not run it. Every function prints one `==> ...` line per thing it
# does and stops the script with a message saying what to do when it cannot go on.

CRAWLFLEET_DEFAULT_DATABASE_URL="postgres://postgres@127.0.0.1:5432/crawlfleet"
CRAWLFLEET_DEFAULT_REDIS_URL="redis://127.0.0.1:6379"

# --- output -------------------------------------------------------------------------

step() { printf '==> %s\n' "$*"; }

warn() { printf 'warning: %s\n' "$*" >&2; }

# die MESSAGE [HINT...]: print the problem, then one line per hint, and stop.
die() {
    printf 'error: %s\n' "$1" >&2
    shift
    local hint
    for hint in "$@"; do
        printf '       %s\n' "$hint" >&2
    done
    exit 1
}

# run_quiet DESCRIPTION COMMAND...: run a chatty command (apt-get, pg_createcluster)
# and show its output only when it fails, so a normal run stays one line per step.
run_quiet() {
    local description=$1 output status=0
    shift
    output=$(mktemp)
    "$@" >"$output" 2>&1 || status=$?
    if ((status != 0)); then
        tail -n 40 "$output" >&2
        rm -f "$output"
        die "$description failed (exit $status): $*"
    fi
    rm -f "$output"
}

# format_duration SECONDS -> "42s" or "3m07s"
format_duration() {
    local total=$1
    if ((total >= 60)); then
        printf '%dm%02ds' $((total / 60)) $((total % 60))
    else
        printf '%ds' "$total"
    fi
}

# --- configuration ------------------------------------------------------------------

# load_env_files FILE...: load git-ignored local env files, listed from the most to
# the least specific (`load_env_files .env.local .env`). Like dotenv, a variable
# already set in the caller's environment wins over the files, and .env.local wins
# over .env: we remember the caller's values, source the files least specific first
# with `set -a`, then put the caller's values back.
load_env_files() {
    local -A callers=()
    local file key i
    for file in "$@"; do
        [[ -f $file ]] || continue
        while IFS= read -r key; do
            if [[ -n ${!key+set} && -z ${callers[$key]+set} ]]; then
                callers[$key]=${!key}
            fi
        done < <(sed -nE 's/^[[:space:]]*(export[[:space:]]+)?([A-Za-z_][A-Za-z0-9_]*)=.*/\2/p' "$file")
    done
    for ((i = $# ; i >= 1; i--)); do
        file=${!i}
        [[ -f $file ]] || continue
        step "loading $file"
        set -a
        # shellcheck disable=SC1090 # the files are the developer's own
        source "$file"
        set +a
    done
    for key in "${!callers[@]}"; do
        export "$key=${callers[$key]}"
    done
}

# apply_defaults: DATABASE_URL and REDIS_URL for a local machine when unset. Called
# after load_env_files (a default set earlier would hide the files' values) and by
# every ensure_* function, so each also works on its own.
apply_defaults() {
    : "${DATABASE_URL:=$CRAWLFLEET_DEFAULT_DATABASE_URL}"
    : "${REDIS_URL:=$CRAWLFLEET_DEFAULT_REDIS_URL}"
    export DATABASE_URL REDIS_URL
}

# --- building -----------------------------------------------------------------------

# build_crawlfleet [CARGO ARGUMENTS...]: the debug binaries of the workspace (crawlfleet
# and the tools it runs beside it: crawlfleet-simulate, crawlfleet-demo) and every
# example, against the committed .sqlx/ query data. The examples use the
# dev-dependencies, which turn on features of shared dependencies (syn's `fold`, url's
# `serde`), so this resolves the same features as `cargo test --workspace` and reuses
# what it compiled. `cargo build --bin crawlfleet` alone would compile a second copy of
# nearly every dependency: minutes, and gigabytes of disk.
build_crawlfleet() {
    SQLX_OFFLINE=true cargo build --locked --workspace --bins --examples "$@"
}

# parse_url URL DEFAULT_PORT: split scheme://[user[:password]@]host[:port][/path][?query]
# into URL_USER URL_PASSWORD URL_HOST URL_PORT URL_PATH (the query is dropped).
# Handles a missing port, a bracketed IPv6 host ([::1]:5432) and an empty host
# (postgres:///db, a Unix socket for libpq; we use 127.0.0.1 instead).
# URL_USER and URL_PASSWORD stay percent-encoded, as written in the URL.
parse_url() {
    local url=$1 default_port=$2 rest authority hostport userinfo
    [[ $url == *://* ]] || die "not a URL: '$(redact_url "$url")'" "expected scheme://[user[:password]@]host[:port][/path]"
    rest=${url#*://}
    rest=${rest%%\?*}
    authority=${rest%%/*}
    URL_PATH=""
    if [[ $rest == */* ]]; then
        URL_PATH=${rest#*/}
    fi
    userinfo=""
    hostport=$authority
    if [[ $authority == *@* ]]; then
        # The last @ ends the user info: a password may contain a raw @.
        userinfo=${authority%@*}
        hostport=${authority##*@}
    fi
    URL_USER=${userinfo%%:*}
    URL_PASSWORD=""
    if [[ $userinfo == *:* ]]; then
        URL_PASSWORD=${userinfo#*:}
    fi
    if [[ $hostport == \[* ]]; then
        URL_HOST=${hostport%%]*}
        URL_HOST=${URL_HOST#\[}
        URL_PORT=${hostport#*]}
        URL_PORT=${URL_PORT#:}
    else
        URL_HOST=${hostport%%:*}
        URL_PORT=""
        if [[ $hostport == *:* ]]; then
            URL_PORT=${hostport##*:}
        fi
    fi
    : "${URL_HOST:=127.0.0.1}"
    : "${URL_PORT:=$default_port}"
    [[ $URL_PORT =~ ^[0-9]+$ ]] || die "bad port '$URL_PORT' in URL '$(redact_url "$url")'"
}

# redact_url URL: the URL with its password replaced, for messages.
redact_url() {
    sed -E 's#(://[^:/@]*:)[^/]*@#\1***@#' <<<"$1"
}

# percent_decode STRING: undo %XX escapes (user names and passwords in URLs).
percent_decode() {
    printf '%b' "${1//%/\\x}"
}

is_local_host() {
    [[ $1 == localhost || $1 == 127.* || $1 == ::1 ]]
}

# --- reachability probes --------------------------------------------------------------

# tcp_open HOST PORT: something accepts TCP connections there. Used only while
# the proper client (pg_isready, redis-cli) may not be installed yet.
tcp_open() {
    # shellcheck disable=SC2016 # $1 and $2 belong to the inner bash
    timeout 3 bash -c 'exec 3<>"/dev/tcp/$1/$2"' _ "$1" "$2" 2>/dev/null
}

postgres_ready() {
    parse_url "$DATABASE_URL" 5432
    if command -v pg_isready >/dev/null; then
        pg_isready -q -t 3 -h "$URL_HOST" -p "$URL_PORT"
    else
        tcp_open "$URL_HOST" "$URL_PORT"
    fi
}

redis_ready() {
    local reply user password
    local -a args auth=()
    parse_url "$REDIS_URL" 6379
    if ! command -v redis-cli >/dev/null; then
        tcp_open "$URL_HOST" "$URL_PORT"
        return
    fi
    # Not `redis-cli -u "$REDIS_URL"`: redis-cli 7.0 does not decode %XX in a
    # password that has no user name before it. The password goes in through
    # REDISCLI_AUTH, which keeps it out of `ps`.
    args=(-h "$URL_HOST" -p "$URL_PORT")
    [[ $REDIS_URL == rediss://* ]] && args+=(--tls)
    user=$(percent_decode "$URL_USER")
    password=$(percent_decode "$URL_PASSWORD")
    [[ -n $user ]] && args+=(--user "$user")
    [[ -n $password ]] && auth=("REDISCLI_AUTH=$password")
    # redis-cli exits 0 even for an error reply (NOAUTH...): compare the answer.
    reply=$(env -u REDISCLI_AUTH "${auth[@]}" timeout 5 redis-cli "${args[@]}" ping 2>/dev/null) || return 1
    [[ $reply == PONG ]]
}

# port_holder PORT: prints who listens on TCP PORT (any address) as "name (pid N)",
# or "another program" when this user may not see which; fails when nobody does.
port_holder() {
    local port=$1 line hex inode fd
    if command -v ss >/dev/null; then
        line=$(ss -Hltnp "sport = :$port" 2>/dev/null | head -n 1)
        [[ -n $line ]] || return 1
        if [[ $line =~ users:\(\(\"([^\"]+)\",pid=([0-9]+) ]]; then
            printf '%s (pid %s)\n' "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}"
        else
            printf 'another program\n'
        fi
        return 0
    fi
    # No ss: the kernel's socket tables, then whose descriptor the socket is.
    printf -v hex '%04X' "$port"
    inode=$(awk -v port=":$hex" '$2 ~ port"$" && $4 == "0A" { print $10; exit }' \
        /proc/net/tcp /proc/net/tcp6 2>/dev/null)
    [[ -n $inode ]] || return 1
    for fd in /proc/[0-9]*/fd/*; do
        if [[ $(readlink "$fd" 2>/dev/null) == "socket:[$inode]" ]]; then
            fd=${fd#/proc/}
            printf '%s (pid %s)\n' "$(cat "/proc/${fd%%/*}/comm" 2>/dev/null)" "${fd%%/*}"
            return 0
        fi
    done
    printf 'another program\n'
}

# ensure_port_free PORT WHAT VARIABLE: stop, saying who holds it and what to do,
# when something already listens on PORT (crawlfleet would exit 5, port taken).
ensure_port_free() {
    local port=$1 what=$2 var=$3 holder
    holder=$(port_holder "$port") || return 0
    local -a hints=()
    if [[ $holder =~ ^crawlfleet\ \(pid\ ([0-9]+)\) ]]; then
        hints+=("a crawlfleet is running already: use it, or stop it (kill ${BASH_REMATCH[1]})")
    elif [[ $holder =~ \(pid\ ([0-9]+)\) ]]; then
        hints+=("stop it (kill ${BASH_REMATCH[1]}) if it is not needed,")
    else
        hints+=("stop it if it is not needed (sudo ss -ltnp 'sport = :$port' names it),")
    fi
    hints+=("or give crawlfleet another port: $var=<port> $0 (or $var=... in .env.local)")
    die "port $port ($what, $var) is taken by $holder" "${hints[@]}"
}

# wait_for SECONDS COMMAND...: retry COMMAND about once a second until it succeeds;
# fail once SECONDS have passed (the probes have their own short timeouts).
wait_for() {
    local deadline=$((SECONDS + $1))
    shift
    until "$@"; do
        ((SECONDS < deadline)) || return 1
        sleep 1
    done
}

# --- packages -----------------------------------------------------------------------

# Set when this run installed the postgresql package: Debian's postinst then created a
# cluster whose pg_hba.conf asks for passwords on TCP, which ensure_postgres fixes.
CRAWLFLEET_INSTALLED_POSTGRES=false

postgres_server_installed() {
    command -v pg_ctlcluster >/dev/null && compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null
}

# ensure_packages: install with apt-get whatever is missing (as root), or say what to
# install and stop (as anyone else). The Postgres and Redis servers are only needed
# when nothing answers at DATABASE_URL / REDIS_URL.
ensure_packages() {
    apply_defaults
    local -a missing=()
    [[ -x /usr/bin/chromium ]] || missing+=(chromium)
    [[ -x /usr/bin/chromedriver ]] || missing+=(chromium-driver)
    { command -v ps && command -v pgrep; } >/dev/null || missing+=(procps)
    { command -v psql && command -v pg_isready; } >/dev/null || missing+=(postgresql-client)
    command -v redis-cli >/dev/null || missing+=(redis-tools)
    if ! postgres_ready && ! postgres_server_installed; then
        missing+=(postgresql)
    fi
    if ! redis_ready && ! command -v redis-server >/dev/null; then
        missing+=(redis-server)
    fi

    if ((${#missing[@]} == 0)); then
        step "system packages present"
        return 0
    fi
    if ((EUID != 0)); then
        die "missing system packages: ${missing[*]}" \
            "install them, then run this again:" \
            "  sudo apt-get update && sudo apt-get install -y ${missing[*]}"
    fi
    command -v apt-get >/dev/null \
        || die "missing system packages: ${missing[*]}" "this script installs them only with apt-get (Debian/Ubuntu); install them by hand"

    step "apt-get update"
    run_quiet "apt-get update" env DEBIAN_FRONTEND=noninteractive apt-get update
    step "installing ${missing[*]} (apt-get)"
    run_quiet "apt-get install" env DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}"
    if [[ " ${missing[*]} " == *" postgresql "* ]]; then
        CRAWLFLEET_INSTALLED_POSTGRES=true
    fi
}

# --- Postgres -----------------------------------------------------------------------

# Name of the local Debian cluster to start or create. Only tests of this script
# change it (to try cluster creation without touching `main`).
: "${CRAWLFLEET_PG_CLUSTER:=main}"

# The newest installed Postgres version that has our cluster, if any.
existing_cluster_version() {
    local version
    [[ -d /etc/postgresql ]] || return 0
    while IFS= read -r version; do
        if [[ -f /etc/postgresql/$version/$CRAWLFLEET_PG_CLUSTER/postgresql.conf ]]; then
            printf '%s\n' "$version"
            return 0
        fi
    done < <(find /etc/postgresql -mindepth 1 -maxdepth 1 -type d -printf '%f\n' | sort -rV)
}

cluster_port() {
    sed -nE 's/^[[:space:]]*port[[:space:]]*=[[:space:]]*([0-9]+).*/\1/p' \
        "/etc/postgresql/$1/$CRAWLFLEET_PG_CLUSTER/postgresql.conf" | tail -n 1
}

cluster_online() {
    pg_ctlcluster "$1" "$CRAWLFLEET_PG_CLUSTER" status >/dev/null 2>&1
}

# trust_local_tcp VERSION: let TCP connections from this machine in without a
# password, so postgres://postgres@127.0.0.1/... works. Only for clusters this
# script created (or whose package it installed): a cluster someone set up keeps
# its own rules.
trust_local_tcp() {
    local version=$1 hba address
    hba=/etc/postgresql/$version/$CRAWLFLEET_PG_CLUSTER/pg_hba.conf
    step "trusting local TCP connections in $hba"
    for address in 127.0.0.1/32 ::1/128; do
        if grep -qE "^host[[:space:]]+all[[:space:]]+all[[:space:]]+${address}[[:space:]]" "$hba"; then
            sed -i -E "s#^(host[[:space:]]+all[[:space:]]+all[[:space:]]+${address}[[:space:]]+)[^[:space:]]+#\\1trust#" "$hba"
        else
            printf 'host    all             all             %-23s trust\n' "$address" >>"$hba"
        fi
    done
    if cluster_online "$version"; then
        pg_ctlcluster "$version" "$CRAWLFLEET_PG_CLUSTER" reload
    fi
}

# ensure_postgres: make sure a Postgres answers at DATABASE_URL's host and port,
# starting (or first creating) the local Debian cluster if it does not.
ensure_postgres() {
    apply_defaults
    parse_url "$DATABASE_URL" 5432
    local host=$URL_HOST port=$URL_PORT version

    if [[ $CRAWLFLEET_INSTALLED_POSTGRES == true ]]; then
        version=$(existing_cluster_version)
        if [[ -n $version ]]; then
            trust_local_tcp "$version"
        fi
    fi

    if postgres_ready; then
        step "Postgres is up at $host:$port"
        return 0
    fi
    is_local_host "$host" \
        || die "Postgres at $host:$port (DATABASE_URL) does not answer" \
            "start it, or point DATABASE_URL at a running server"
    ((EUID == 0)) \
        || die "no Postgres answers at $host:$port and only root can start the local cluster" \
            "start it: sudo pg_ctlcluster <version> main start (see pg_lsclusters)," \
            "or point DATABASE_URL at a running server"
    postgres_server_installed \
        || die "no Postgres answers at $host:$port and the server is not installed" \
            "run: apt-get install -y postgresql"

    version=$(existing_cluster_version)
    if [[ -z $version ]]; then
        version=$(find /usr/lib/postgresql -mindepth 1 -maxdepth 1 -type d -printf '%f\n' | sort -V | tail -n 1)
        step "creating local Postgres cluster $version/$CRAWLFLEET_PG_CLUSTER on port $port"
        run_quiet "pg_createcluster" pg_createcluster --port "$port" "$version" "$CRAWLFLEET_PG_CLUSTER"
        trust_local_tcp "$version"
    fi

    local configured_port
    configured_port=$(cluster_port "$version")
    if [[ -n $configured_port && $configured_port != "$port" ]]; then
        die "the local cluster $version/$CRAWLFLEET_PG_CLUSTER listens on port $configured_port, DATABASE_URL says $port" \
            "change the port in DATABASE_URL (or in /etc/postgresql/$version/$CRAWLFLEET_PG_CLUSTER/postgresql.conf)"
    fi

    if ! cluster_online "$version"; then
        step "starting local Postgres $version/$CRAWLFLEET_PG_CLUSTER"
        run_quiet "pg_ctlcluster start" \
            pg_ctlcluster --skip-systemctl-redirect "$version" "$CRAWLFLEET_PG_CLUSTER" start
    fi
    step "waiting for Postgres at $host:$port"
    wait_for 30 postgres_ready \
        || die "Postgres did not answer at $host:$port within 30 s" \
            "see /var/log/postgresql/postgresql-$version-$CRAWLFLEET_PG_CLUSTER.log and pg_lsclusters"
}

# database_url_for NAME: DATABASE_URL pointed at database NAME on the same server,
# same user, password and options (its query string).
database_url_for() {
    local base=${DATABASE_URL%%\?*} query=""
    if [[ $DATABASE_URL == *\?* ]]; then
        query="?${DATABASE_URL#*\?}"
    fi
    local scheme_and_authority=${base#*://}
    scheme_and_authority="${base%%://*}://${scheme_and_authority%%/*}"
    printf '%s/%s%s\n' "$scheme_and_authority" "$1" "$query"
}

# admin_database_url: the `postgres` maintenance database of DATABASE_URL's server.
admin_database_url() {
    database_url_for postgres
}

# ensure_database [NAME]: create the database (default: the one DATABASE_URL names)
# unless it exists.
ensure_database() {
    apply_defaults
    parse_url "$DATABASE_URL" 5432
    local name=${1:-$URL_PATH} admin_url exists
    [[ -n $name ]] || die "DATABASE_URL names no database: $(redact_url "$DATABASE_URL")" \
        "add one, e.g. postgres://postgres@127.0.0.1:5432/crawlfleet"
    admin_url=$(admin_database_url)
    # Variables go through psql's :'name' / :"name" quoting, which psql only applies
    # to scripts read from stdin, not to -c.
    exists=$(psql "$admin_url" -X -q -t -A -v ON_ERROR_STOP=1 -v name="$name" 2>&1 <<'SQL'
SELECT 1 FROM pg_database WHERE datname = :'name';
SQL
    ) || die "cannot query Postgres at $URL_HOST:$URL_PORT as '$(percent_decode "${URL_USER:-(default user)}")': $exists" \
        "check the user and password in DATABASE_URL"
    if [[ $exists == 1 ]]; then
        step "database $name exists"
        return 0
    fi
    step "creating database $name"
    run_quiet "CREATE DATABASE $name" \
        psql "$admin_url" -X -q -v ON_ERROR_STOP=1 -v name="$name" <<'SQL'
CREATE DATABASE :"name";
SQL
}

# --- Redis --------------------------------------------------------------------------

# redis_state_dirs: where a Redis we start keeps its (empty) data and its log.
# /var/lib/redis and /var/log/redis as root; under the user's state dir otherwise.
redis_state_dirs() {
    if ((EUID == 0)); then
        REDIS_DATA_DIR=/var/lib/redis
        REDIS_LOG_DIR=/var/log/redis
    else
        REDIS_DATA_DIR=${XDG_STATE_HOME:-$HOME/.local/state}/crawlfleet/redis
        REDIS_LOG_DIR=$REDIS_DATA_DIR
    fi
    mkdir -p "$REDIS_DATA_DIR" "$REDIS_LOG_DIR"
}

# ensure_redis: make sure a Redis answers PING at REDIS_URL, starting a local one
# (no persistence: crawlfleet's durable state lives in Postgres) if it does not.
ensure_redis() {
    apply_defaults
    parse_url "$REDIS_URL" 6379
    local host=$URL_HOST port=$URL_PORT user password logfile config="" quoted

    if redis_ready; then
        step "Redis is up at $host:$port"
        return 0
    fi
    is_local_host "$host" \
        || die "Redis at $host:$port (REDIS_URL) does not answer PING" \
            "start it, or point REDIS_URL at a running server"
    if tcp_open "$host" "$port"; then
        die "something listens on $host:$port but does not answer Redis PING with REDIS_URL's credentials" \
            "check the password in REDIS_URL, or use a free port"
    fi
    command -v redis-server >/dev/null \
        || die "no Redis answers at $host:$port and redis-server is not installed" \
            "run: apt-get install -y redis-server"

    redis_state_dirs
    logfile=$REDIS_LOG_DIR/crawlfleet.log
    # A password in REDIS_URL becomes the started server's password (with a user
    # name: that ACL user's, and the password-less default user is switched off).
    # It goes in through stdin, as config, so it does not show up in `ps`.
    user=$(percent_decode "$URL_USER")
    password=$(percent_decode "$URL_PASSWORD")
    quoted=${password//\\/\\\\}
    quoted=${quoted//\"/\\\"}
    if [[ -n $password && (-z $user || $user == default) ]]; then
        config="requirepass \"$quoted\""
    elif [[ -n $password ]]; then
        printf -v config 'user default off\nuser "%s" on ">%s" ~* &* +@all' "$user" "$quoted"
    fi
    step "starting local Redis on port $port (log: $logfile)"
    run_quiet "redis-server" redis-server - \
        --daemonize yes --bind 127.0.0.1 -::1 --port "$port" \
        --save "" --appendonly no --dir "$REDIS_DATA_DIR" --logfile "$logfile" <<<"$config"

    step "waiting for Redis at $host:$port"
    wait_for 10 redis_ready \
        || die "Redis did not answer PING at $host:$port within 10 s" "see $logfile"
}
