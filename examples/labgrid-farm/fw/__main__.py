"""The console loop: a banner, then a prompt after every reply; one command per line."""

from __future__ import annotations

import os

from fw import VERSION
from fw.console import Console

PROMPT = b"> "


def main() -> None:
    console = Console()
    os.write(1, f"{VERSION} ready\n".encode() + PROMPT)
    pending = b""
    while True:
        data = os.read(0, 4096)
        if not data:
            return  # the console was closed
        pending += data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        *lines, pending = pending.split(b"\n")
        for line in lines:
            reply = console.handle(line.decode(errors="replace").strip())
            os.write(1, reply.encode() + b"\n" + PROMPT)


if __name__ == "__main__":
    main()
