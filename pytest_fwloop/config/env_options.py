"""The environment fixtures' options (DESIGN.md §7), a part of the one option table.

Each is read, and checked, only by a test that requests its fixture (`envs/setup.py`), so
each has an example for its error message. Plain pytest imports this with the table: standard
library only.
"""

from __future__ import annotations

from pytest_fwloop.config.option_spec import OptionSpec

#: The fwloop_ssh_known_hosts value that turns strict host key checking off for unknown hosts.
KNOWN_HOSTS_ACCEPT_NEW = "insecure-accept-new"
QEMU_COMMAND_EXAMPLE = (
    "qemu-system-arm -M mps2-an385 -display none -monitor none -serial stdio -kernel {firmware}"
)

ENV_OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec(
        "qemu_cmd",
        "QEMU command for fwloop_qemu with {firmware} and {port} placeholders; split like a "
        "shell line, never run by a shell",
        "",
        example=QEMU_COMMAND_EXAMPLE,
    ),
    OptionSpec(
        "firmware",
        "firmware image for {firmware} in fwloop_qemu_cmd, relative to the rootdir",
        "",
        example="build/firmware.elf",
    ),
    OptionSpec(
        "console_ready",
        "regex the console must show at setup (QEMU: the banner; serial: the prompt after a "
        "newline); ini drops a trailing space, write it as [ ]; empty: no health check",
        "",
        example=r"FW \S+ ready",
    ),
    OptionSpec(
        "console_timeout",
        "seconds to wait for the ready regex, and the default expect/run timeout",
        "10",
        example="10",
    ),
    OptionSpec(
        "serial_url",
        "pyserial URL of the board's console for fwloop_serial (/dev/ttyUSB0, socket://, "
        "rfc2217://, loop://)",
        "",
        example="/dev/ttyUSB0",
    ),
    OptionSpec("serial_baudrate", "baud rate for fwloop_serial_url", "115200", example="115200"),
    OptionSpec(
        "serial_pool",
        "one serial URL per pytest-xdist worker (gwN takes line N); overrides fwloop_serial_url",
        [],
        kind="linelist",
        example="/dev/ttyUSB0",
    ),
    OptionSpec(
        "ssh_target",
        "user@host:port of the target for fwloop_ssh",
        "",
        example="root@192.168.0.20:22",
    ),
    OptionSpec(
        "ssh_key",
        "private key file for fwloop_ssh, relative to the rootdir; empty: your default keys",
        "",
        example="keys/id_ed25519",
    ),
    OptionSpec(
        "ssh_known_hosts",
        "known_hosts file checked strictly (empty: ~/.ssh/known_hosts), or "
        f"{KNOWN_HOSTS_ACCEPT_NEW} to accept unknown host keys on a trusted network",
        "",
        example="keys/known_hosts",
    ),
    OptionSpec(
        "ssh_pool",
        "one user@host:port per pytest-xdist worker (gwN takes line N); overrides "
        "fwloop_ssh_target",
        [],
        kind="linelist",
        example="root@192.168.0.20:22",
    ),
)
