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
nohup setsid "$ROOT/.venv/bin/jupyter" lab --no-browser --ip=0.0.0.0 --port="$PORT" \
    --ServerApp.port_retries=0 --ServerApp.token='' --ServerApp.root_dir="$ROOT" \
    --ServerApp.terminado_settings="{\"shell_command\": [\"$SHELL_CMD\"]}" \
    $ROOT_OK >"$LOG" 2>&1 </dev/null &
echo $! >"$PIDFILE"
echo "JupyterLab starting on port $PORT (pid $!); its log: $LOG"
