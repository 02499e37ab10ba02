#!/usr/bin/env bash
# Replays the recorded answers (fwloop-answers/coder/NN.json) by hand on a scratch copy of this
# example: each patch must apply on top of the previous ones, build with arm-none-eabi-gcc, and
# turn exactly its own seeded bug's tests green in QEMU; after the last one the suite passes.
# The reviewer answers are checked for shape. The example itself is never modified.
#
#   ./verify_answers.sh            # PYTHON=/path/to/python overrides the interpreter
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [[ -z "${PYTHON:-}" ]]; then
    if [[ -x "$here/../../.venv/bin/python" ]]; then
        PYTHON="$here/../../.venv/bin/python"
    else
        PYTHON=python3
    fi
fi

# The tests each seeded bug breaks, in the order the recorded answers fix them.
bug_tests=(
    "test_adc_full_scale_is_vref test_adc_one_volt"
    "test_fletcher_check_value test_fletcher_longer_inputs"
    "test_gpio_clear_keeps_the_other_pins test_gpio_clear_one_pin"
)

scratch="$(mktemp -d "${TMPDIR:-/tmp}/cm3fw-verify.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT
ws="$scratch/qemu-cortex-m"
mkdir "$ws"
tar -C "$here" --exclude=./build --exclude=./.fwloop --exclude=__pycache__ \
    --exclude=.pytest_cache -cf - . | tar -C "$ws" -xf -
cd "$ws"
git init -q .

fail() {
    echo "verify_answers: $*" >&2
    exit 1
}

# Prints the sorted names of the tests that did not pass. The suite runs with pytest-fwloop's
# fixtures (fwloop_qemu) but without --fwloop. Any ERROR is fatal: a seeded bug must show as a
# wrong answer, never as a firmware that does not boot.
failing_tests() {
    local log="$scratch/pytest.log" rc=0
    "$PYTHON" -m pytest -q -p no:cacheprovider -rfE >"$log" 2>&1 || rc=$?
    if [[ $rc -ne 0 && $rc -ne 1 ]] || grep -q '^ERROR ' "$log"; then
        cat "$log" >&2
        fail "pytest exited $rc or reported errors (log above)"
    fi
    awk '/^FAILED /{ sub(/^tests\/test_firmware\.py::/, "", $2); print $2 }' "$log" | sort
}

build() {
    make >"$scratch/make.log" 2>&1 || { cat "$scratch/make.log" >&2; fail "make failed"; }
    if grep -q 'warning:' "$scratch/make.log"; then
        cat "$scratch/make.log" >&2
        fail "the build has warnings"
    fi
}

# Checks both answer shapes and writes the coder's patch to stdout.
extract_patch() {
    "$PYTHON" - "$1" "$2" <<'PY'
import json, re, sys

coder = json.load(open(sys.argv[1]))
reviewer = json.load(open(sys.argv[2]))
analysis = coder["analysis"]
assert set(coder) == {"analysis", "patch", "summary"}, sorted(coder)
assert isinstance(analysis["root_cause"], str) and analysis["root_cause"]
assert all(isinstance(h, str) for h in analysis["hypotheses"]) and analysis["hypotheses"]
assert 0 <= analysis["confidence"] <= 1
assert isinstance(coder["summary"], str) and coder["summary"]
assert reviewer["decision"] == "approve" and reviewer["must_fix"] == []
assert 0 <= reviewer["risk"] <= 1 and isinstance(reviewer["summary"], str)
patch = coder["patch"]
paths = re.findall(r"^(?:---|\+\+\+) [ab]/(\S+)$", patch, flags=re.M)
assert paths, "patch names no files"
for path in paths:
    assert path.startswith("firmware/"), f"patch touches {path}, outside firmware/"
sys.stdout.write(patch)
PY
}

build
remaining="$(echo "${bug_tests[*]}" | tr ' ' '\n' | sort)"
failing="$(failing_tests)"
[[ "$failing" == "$remaining" ]] ||
    fail "baseline failing set differs; expected:"$'\n'"$remaining"$'\n'"got:"$'\n'"$failing"
echo "baseline: $(awk 'END { print NR }' <<<"$failing") failing: $(echo $failing)"

for i in "${!bug_tests[@]}"; do
    n="$(printf '%02d' $((i + 1)))"
    patch="$scratch/$n.diff"
    extract_patch "$ws/fwloop-answers/coder/$n.json" "$ws/fwloop-answers/reviewer/$n.json" >"$patch" ||
        fail "fwloop-answers/coder/$n.json or reviewer/$n.json is malformed"
    git apply --check "$patch" || fail "coder/$n.json: patch does not apply"
    git apply "$patch"
    build
    fixed="$(echo "${bug_tests[$i]}" | tr ' ' '\n' | sort)"
    remaining="$(comm -23 <(echo "$remaining") <(echo "$fixed") | sed '/^$/d')"
    failing="$(failing_tests)"
    [[ "$failing" == "$remaining" ]] ||
        fail "after coder/$n.json the failing set differs; expected:"$'\n'"$remaining"$'\n'"got:"$'\n'"$failing"
    echo "coder/$n.json: applies, builds, fixes $(echo $fixed); still failing: $(echo ${failing:-none})"
done

[[ -z "$failing" ]] || fail "tests still failing after the last answer: $failing"
echo "verify_answers: OK, all recorded answers apply in order and the suite ends green"
