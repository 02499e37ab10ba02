"""The 8-bit checksum of Intel HEX records: the two's complement of the byte sum, so that the
sum of a record's bytes and its checksum is 0 modulo 256."""

from __future__ import annotations


def sum8(data: bytes) -> int:
    total = sum(data) & 0xFF
    return ~total & 0xFF
