"""The 12-bit ADC: raw readings 0..4095 across a 3300 mV reference."""

from __future__ import annotations

RAW_MAX = 4095
VREF_MV = 3300


def to_millivolts(raw: int) -> int:
    """The reading in millivolts, rounded down: full scale (4095) is the reference itself."""
    return raw * VREF_MV // (RAW_MAX + 1)
