#!/usr/bin/env bash
# The two commands of the README's quick start:
#   ./dev.sh demo   run the repair loop on the bundled example (no model, no hardware)
#   ./dev.sh test   lint, type-check and run the whole test suite
# Each installs what it needs first (Debian packages via apt-get, Python packages into .venv).
set -euo pipefail
cd "$(dirname "$0")"
VENV=${FWLOOP_VENV:-.venv}

apt_install() {
    local missing=("$@")
    [ ${#missing[@]} -eq 0 ] && return 0
    echo "dev.sh: installing Debian packages: ${missing[*]}"
    local sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo=(sudo -n); else
            echo "dev.sh: need root (or passwordless sudo) to apt-get install ${missing[*]}; install them and rerun" >&2
            exit 4
        fi
    fi
    export DEBIAN_FRONTEND=noninteractive
    "${sudo[@]}" apt-get update -qq
    "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

system_deps() {
    local missing=()
    command -v gcc >/dev/null || missing+=(gcc libc6-dev)
    command -v make >/dev/null || missing+=(make)
    command -v git >/dev/null || missing+=(git)
    python3 -c 'import ensurepip, venv' 2>/dev/null || missing+=(python3-venv)
    apt_install "${missing[@]}"
}

python_env() {
    local stamp="$VENV/.fwloop-installed"
    if [ ! -x "$VENV/bin/python" ]; then
        python3 -m venv "$VENV"
    fi
    if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
        "$VENV/bin/python" -m pip install -q --disable-pip-version-check -U pip
        "$VENV/bin/python" -m pip install -q --disable-pip-version-check -e '.[dev]'
        touch "$stamp"
    fi
}

demo() {
    system_deps
    python_env
    # The loop edits the tree it runs in and keeps the fix on success: run it on a scratch copy.
    local scratch python
    python="$(cd "$VENV" && pwd)/bin/python"
    scratch=$(mktemp -d "${TMPDIR:-/tmp}/fwloop-demo.XXXXXX")
    cp -r examples/uart-console/. "$scratch/"
    rm -rf "$scratch/build" "$scratch/.fwloop"
    echo "dev.sh: running the loop on a copy of examples/uart-console in $scratch"
    cd "$scratch"
    local status=0
    "$python" -m pytest --fwloop --max-iter=10 "$@" || status=$?
    if grep -qs '"outcome": "awaiting_operator_confirm"' .fwloop/runs/*/summary.json; then
        # Proposal mode (docs/operator.md): the operator's turn.
        local fwloop
        fwloop="$(dirname "$python")/fwloop"
        echo "dev.sh: the proposal waits for you; read it, then answer from $scratch:"
        echo "    cd $scratch"
        echo "    $fwloop show last && cat .fwloop/runs/*/proposal.md"
        echo "    $fwloop confirm last            # apply it through the strict gate and go on"
        echo "    $fwloop followup last 'TEXT'    # or ask the coder for a revised proposal"
    fi
    return "$status"
}

rig_deps() {
    # The environment tests and examples run real QEMU, an ARM toolchain, sshd and socat; the
    # build-list and Zephyr-shaped tests CMake and ninja; the build-sandbox tests run bubblewrap;
    # the report tests open report.html in Chromium.
    local missing=()
    command -v qemu-system-arm >/dev/null || missing+=(qemu-system-arm)
    command -v arm-none-eabi-gcc >/dev/null || missing+=(gcc-arm-none-eabi)
    [ -d /usr/lib/arm-none-eabi/newlib ] || missing+=(libnewlib-arm-none-eabi)
    [ -x /usr/sbin/sshd ] || missing+=(openssh-server)
    command -v ssh-keygen >/dev/null || missing+=(openssh-client)
    command -v socat >/dev/null || missing+=(socat)
    command -v bwrap >/dev/null || missing+=(bubblewrap)  # fwloop_build_sandbox tests
    command -v chromium >/dev/null || missing+=(chromium)  # report.html in a real browser
    command -v cmake >/dev/null || missing+=(cmake)  # the Zephyr-shaped and ninja build tests
    command -v ninja >/dev/null || missing+=(ninja-build)
    apt_install "${missing[@]}"
}

# The real agent CLIs the provider tests drive against scripted model servers on 127.0.0.1,
# pinned, in a project-local prefix (tests/test_real_clis.py; issue: agents as they behave).
CLAUDE_CODE_VERSION=2.1.330
CODEX_VERSION=0.169.0

agent_clis() {
    local prefix=.tools/agent-clis
    if [ -x "$prefix/node_modules/.bin/claude" ] && [ -x "$prefix/node_modules/.bin/codex" ] &&
        grep -q "\"version\": \"$CLAUDE_CODE_VERSION\"" "$prefix/node_modules/@anthropic-ai/claude-code/package.json" 2>/dev/null &&
        grep -q "\"version\": \"$CODEX_VERSION\"" "$prefix/node_modules/@openai/codex/package.json" 2>/dev/null; then
        return 0
    fi
    if ! command -v npm >/dev/null; then
        echo "dev.sh: npm not found: the real Claude Code and Codex CLI tests will be SKIPPED (install nodejs and npm to run them)" >&2
        return 0
    fi
    echo "dev.sh: installing @anthropic-ai/claude-code@$CLAUDE_CODE_VERSION and @openai/codex@$CODEX_VERSION into $prefix"
    npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error \
        "@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION" "@openai/codex@$CODEX_VERSION" >/dev/null
}

pytest_tiers() {
    # Two workers on a 2-core machine. The fast tier first (the core and the controller,
    # in-process), so a broken core fails in seconds; then the whole-loop stories (`slow`).
    # Coverage of the pure core is gathered over both, printed after the second, must stay >= 95%.
    # The arguments may select tests of one tier only; selecting none at all still fails (5).
    local fast=0 slow=0
    "$VENV/bin/python" -m pytest -n 2 -m "not slow" --cov --cov-report= --cov-fail-under=0 "$@" ||
        fast=$?
    [ "$fast" -eq 0 ] || [ "$fast" -eq 5 ] || return "$fast"
    "$VENV/bin/python" -m pytest -n 2 -m slow --cov --cov-append --cov-report=term "$@" || slow=$?
    if [ "$slow" -eq 5 ] && [ "$fast" -eq 0 ]; then return 0; fi
    return "$slow"
}

# labgrid for the board-farm tests (tests/test_farm.py), in a venv of its own with this checkout:
# its pytest plugin and its fork of pyserial stay out of the project's venv and of every other test.
LABGRID_VERSION=26.0.1

labgrid_env() {
    local venv=.tools/labgrid-venv stamp=.tools/labgrid-venv/.fwloop-installed
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$LABGRID_VERSION" ] && [ "$stamp" -nt pyproject.toml ]; then
        return 0
    fi
    echo "dev.sh: installing labgrid==$LABGRID_VERSION and this checkout into $venv"
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check -e '.[labgrid]' "labgrid==$LABGRID_VERSION"
    echo "$LABGRID_VERSION" > "$stamp"
}

test_suite() {
    system_deps
    rig_deps
    python_env
    agent_clis
    labgrid_env
    "$VENV/bin/ruff" check pytest_fwloop tests benchmarks conftest.py
    "$VENV/bin/ruff" format --check pytest_fwloop tests benchmarks conftest.py
    "$VENV/bin/mypy"
    pytest_tiers "$@"
    # The fast tier again on the lowest pytest and pydantic the package declares.
    "$VENV/bin/tox" -e lowest -q
}

case "${1:-}" in
    demo) shift; demo "$@" ;;
    test) shift; test_suite "$@" ;;
    *) echo "usage: ./dev.sh demo|test [pytest arguments]" >&2; exit 2 ;;
esac
