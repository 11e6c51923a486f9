# Sourced by clients/run and clients/oauth/run: starting the servers the client checks talk to.

pids=()
logs=()

# Starts a server in the background (`$4...`), logging to `$2`, and waits for the line that
# names its address, which the sed expression `$3` prints; sets `found`. The server is
# remembered in `pids` (for the caller's exit trap) and its log in `logs`.
start() {
    local name=$1 log=$2 pattern=$3
    shift 3
    # Made here, not by the background job's redirection, so the first read below finds it.
    : >"$log"
    "$@" >"$log" 2>&1 &
    local pid=$!
    pids+=("$pid")
    logs+=("$log")
    found=""
    for _ in $(seq 1 120); do
        found=$(sed -n "$pattern" "$log" | head -n 1)
        if [ -n "$found" ] || ! kill -0 "$pid" 2>/dev/null; then
            break
        fi
        sleep 0.5
    done
    if [ -z "$found" ]; then
        echo "$name did not start:" >&2
        cat "$log" >&2
        exit 1
    fi
}
