"""Checksums and framing of the gateway's links."""


def test_version(gateway):
    assert gateway("version") == "GATEWAY 2.4.1"


def test_unknown_command(gateway):
    assert gateway("frobnicate") == "ERR unknown command: frobnicate"


def test_crc8_check_string(gateway):
    # "123456789"
    assert gateway("crc8 31 32 33 34 35 36 37 38 39") == "f4"


def test_crc8_of_nothing_is_usage(gateway):
    assert gateway("crc8") == "ERR usage: crc8|crc16|crc32 HEX..."


def test_crc16_check_string(gateway):
    assert gateway("crc16 313233343536373839") == "29b1"


def test_crc32_check_string(gateway):
    assert gateway("crc32 31 32 33 34 35 36 37 38 39") == "cbf43926"


def test_crc32_of_a_firmware_header(gateway):
    assert gateway("crc32 de ad be ef") == "7c9ca35a"


def test_crc16_of_a_radio_frame(gateway):
    assert gateway("crc16 aa bb cc") == "6cf6"


def test_crc8_rejects_odd_digits(gateway):
    assert gateway("crc8 123") == "ERR usage: crc8|crc16|crc32 HEX..."


def test_cobs_frame_with_zero(gateway):
    assert gateway("cobs 11 00 22") == "02110222"


def test_cobs_round_trip(gateway):
    assert gateway("uncobs 02 11 02 22") == "110022"


def test_cobs_of_a_zero(gateway):
    assert gateway("cobs 00") == "0101"


def test_uncobs_rejects_a_short_frame(gateway):
    assert gateway("uncobs 05 11") == "ERR bad frame"


def test_cobs_of_upper_case_hex(gateway):
    assert gateway("cobs AB CD") == "03abcd"


def test_b64enc(gateway):
    assert gateway("b64enc hello") == "aGVsbG8="


def test_b64dec(gateway):
    assert gateway("b64dec Z2F0ZXdheQ==") == "gateway"


def test_b64dec_rejects_garbage(gateway):
    assert gateway("b64dec abc") == "ERR bad base64"


def test_utf8len_ascii(gateway):
    assert gateway("utf8len 41 42 43") == "3"


def test_utf8len_accented(gateway):
    assert gateway("utf8len 63 61 66 c3 a9") == "4"


def test_utf8len_emoji(gateway):
    assert gateway("utf8len f0 9f 98 80 41") == "2"


def test_utf8len_rejects_a_stray_continuation(gateway):
    assert gateway("utf8len 80") == "ERR not utf-8"
