#!/bin/sh
# Start JupyterLab for this repository, detached, once: the devcontainer's postStartCommand.
#
# nohup + setsid: the server outlives the shell that starts it (a bare `&` in a lifecycle
# command is killed when that shell exits). A server already running (its pid file names a
# live process) is left alone, and --ServerApp.port_retries=0 makes a second server fail
# instead of taking another port. The server's terminals inherit PATH with .venv/bin first.
set -eu
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PORT=${JUPYTERLAB_PORT:-8888}
LOG=${JUPYTERLAB_LOG:-/tmp/jupyterlab.log}
PIDFILE=${JUPYTERLAB_PIDFILE:-/tmp/jupyterlab.pid}

if [ -s "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
    echo "JupyterLab is already running (pid $(cat "$PIDFILE"), port $PORT, log $LOG)"
    exit 0
fi
if [ ! -x "$ROOT/.venv/bin/jupyter" ]; then
    echo "no .venv/bin/jupyter: run 'make venv' first, then 'sh .devcontainer/start-jupyterlab.sh'" >&2
    exit 1
fi
export PATH="$ROOT/.venv/bin:$PATH"
# Terminals run a plain interactive shell: the default, a login shell when there is no tty,
# reads /etc/profile, which sets PATH again without .venv/bin.
SHELL_CMD=$(command -v bash || command -v sh)
# a container whose user is root (the Codespaces images use vscode) needs it said
ROOT_OK=""
if [ "$(id -u)" = 0 ]; then ROOT_OK="--allow-root"; fi
export VIRTUAL_ENV="$ROOT/.venv"
# Who can reach it. The server listens on the loopback interface only. In a Codespace the
# port is forwarded from inside the container, privately by default (only the codespace's
# owner, signed in to GitHub, gets through), so the token is left empty there, and the
# forwarded host name is accepted as local: a loopback server refuses other Host headers
# (jupyter_server's guard against DNS rebinding), and cross-origin requests only from it.
# Anywhere else (a laptop, a shared machine) a random token guards it; the address to open,
# token included, is printed below and in the log. Keep the Codespaces port private: a
# public port would let anyone with its address run code as you.
if [ "${CODESPACES:-}" = true ] && [ -n "${CODESPACE_NAME:-}" ]; then
    FORWARDED="$CODESPACE_NAME-$PORT.${GITHUB_CODESPACES_PORT_FORWARDING_DOMAIN:-app.github.dev}"
    TOKEN=""
    set -- --ServerApp.local_hostnames=localhost --ServerApp.local_hostnames="$FORWARDED" \
        --ServerApp.allow_origin="https://$FORWARDED"
    OPEN="the Ports tab's JupyterLab (port $PORT), https://$FORWARDED"
else
    TOKEN=$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')
    set --
    OPEN="http://127.0.0.1:$PORT/lab?token=$TOKEN"
fi
nohup setsid "$ROOT/.venv/bin/jupyter" lab --no-browser --ip=127.0.0.1 --port="$PORT" \
    --ServerApp.port_retries=0 --IdentityProvider.token="$TOKEN" --ServerApp.root_dir="$ROOT" \
    --ServerApp.terminado_settings="{\"shell_command\": [\"$SHELL_CMD\"]}" \
    "$@" $ROOT_OK >"$LOG" 2>&1 </dev/null &
echo $! >"$PIDFILE"
echo "JupyterLab starting on port $PORT (pid $!); open $OPEN; its log: $LOG"
