"""The command set: each command line gets exactly one reply line."""

from __future__ import annotations

from fw import VERSION
from fw.adc import RAW_MAX, to_millivolts
from fw.checksum import sum8
from fw.fifo import Fifo, FifoEmpty, FifoFull


class Console:
    """One boot of the firmware: the FIFO starts empty."""

    def __init__(self) -> None:
        self.fifo = Fifo()

    def handle(self, line: str) -> str:
        command, _, rest = line.partition(" ")
        if command == "version":
            return VERSION
        if command == "echo":
            return rest
        if command == "sum8":
            return self.checksum(rest)
        if command == "mv":
            return self.millivolts(rest)
        if command == "q":
            return self.queue(rest.split())
        return f"ERR unknown command: {command}"

    def checksum(self, text: str) -> str:
        try:
            data = bytes.fromhex(text)
        except ValueError:
            return f"ERR bad hex: {text}"
        return f"0x{sum8(data):02X}"

    def millivolts(self, text: str) -> str:
        if not text.isdigit() or int(text) > RAW_MAX:
            return f"ERR range: {text}"
        return str(to_millivolts(int(text)))

    def queue(self, args: list[str]) -> str:
        try:
            if args[:1] == ["push"] and len(args) == 2 and args[1].isdigit():
                self.fifo.push(int(args[1]))
                return "OK"
            if args == ["pop"]:
                return str(self.fifo.pop())
            if args == ["len"]:
                return str(len(self.fifo))
            if args == ["clear"]:
                self.fifo.clear()
                return "OK"
        except FifoFull:
            return "ERR full"
        except FifoEmpty:
            return "ERR empty"
        return "ERR usage: q push <n> | pop | len | clear"
