#!/usr/bin/env bash
# Makes the Zephyr workspace that benchmarks/zephyr_tree.py measures (issue 44), from nothing:
#
#     benchmarks/zephyr_setup.sh WORKSPACE NRF_CONNECT_GIT [CMSIS_GIT]
#
# NRF_CONNECT_GIT is a clone (bare is fine) of github:lgalstyan/nrf_connect holding commit
# a86fb816; its `zephyr/` is sdk-zephyr 3.4.99 as an nRF Connect SDK workspace commits it.
# CMSIS_GIT, a clone of github:zephyrproject-rtos/cmsis, is needed for qemu_cortex_m3 only.
# WORKSPACE gains `zephyr/` (the tree, LF line ends, a stand-in for its missing
# `subsys/logging/backends/Kconfig.swo`, committed to a git repository of its own), `cmsis/`
# and `venv/` (Zephyr's base requirements, its pytest-twister-harness, this checkout editable).
# Debian packages it needs and does not install: cmake, ninja-build, gcc; gcc-arm-none-eabi and
# qemu-system-arm for qemu_cortex_m3.
set -euo pipefail

workspace=${1:?usage: zephyr_setup.sh WORKSPACE NRF_CONNECT_GIT [CMSIS_GIT]}
source_git=${2:?usage: zephyr_setup.sh WORKSPACE NRF_CONNECT_GIT [CMSIS_GIT]}
cmsis_git=${3:-}
checkout=$(cd "$(dirname "$0")/.." && pwd)

mkdir -p "$workspace"
cd "$workspace"
rm -rf zephyr
git -C "$source_git" archive a86fb816 zephyr | tar -x

# The workspace's files were committed with CRLF line ends, which Kconfig and CMake misread.
python3 - <<'EOF'
from pathlib import Path

for path in Path("zephyr").rglob("*"):
    if path.is_file() and not path.is_symlink():
        data = path.read_bytes()
        if b"\r\n" in data and b"\0" not in data:
            path.write_bytes(data.replace(b"\r\n", b"\n"))
EOF

# Referenced by subsys/logging/backends/Kconfig and absent from the workspace.
cat > zephyr/subsys/logging/backends/Kconfig.swo <<'EOF'
# Stand-in: this workspace does not carry the file; the symbols its users read.
config LOG_BACKEND_SWO
	bool "Serial Wire Output (SWO) backend"
	depends on HAS_SWO

if LOG_BACKEND_SWO
config LOG_BACKEND_SWO_FREQ_HZ
	int "SWO output frequency"
	default 0
endif
EOF

git -C zephyr init -q
git -C zephyr -c user.name=setup -c user.email=setup@localhost add -A
git -C zephyr -c user.name=setup -c user.email=setup@localhost commit -q -m "sdk-zephyr 3.4.99 (nrf_connect a86fb816), LF"
echo "tree: $(git -C zephyr ls-files | wc -l) files"

if [ -n "$cmsis_git" ]; then
    rm -rf cmsis
    git clone -q "$cmsis_git" cmsis
fi

python3 -m venv venv
venv/bin/pip install -q -r zephyr/scripts/requirements-base.txt
venv/bin/pip install -q zephyr/scripts/pylib/pytest-twister-harness -e "$checkout"
echo "venv: $(venv/bin/python --version)"
