"""FARMFW: the firmware of the example's boards, a line console on the board's UART.

Python stands in for C so the example needs no toolchain: `board.py` boots `python -m fw` on
every console connection, with the connection as its stdin and stdout.
"""

VERSION = "FARMFW v1.0"
