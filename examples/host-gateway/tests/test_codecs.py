"""Simple sums, varints, SLIP framing, TLV records and the config blob."""

IPV4_HEADER = "45 00 00 73 00 00 40 00 40 11 {} c0 a8 00 01 c0 a8 00 c7"
GPGLL = "$GPGLL,4916.45,N,12311.12,W,225444,A"


def test_fletcher16(gateway):
    assert gateway("fletcher16 61 62 63 64 65") == "c8f0"
    assert gateway("fletcher16 6162636465666768") == "0627"


def test_adler32(gateway):
    assert gateway("adler32 57 69 6b 69 70 65 64 69 61") == "11e60398"
    assert gateway("adler32 " + "ff" * 96) == "1f3e5fa1"


def test_inetsum_of_the_rfc1071_example_and_an_odd_byte(gateway):
    assert gateway("inetsum 00 01 f2 03 f4 f5 f6 f7") == "220d"
    assert gateway("inetsum 01 02 03") == "fbfd"


def test_inetsum_of_an_ipv4_header_and_with_its_checksum(gateway):
    assert gateway("inetsum " + IPV4_HEADER.format("00 00")) == "b861"
    assert gateway("inetsum " + IPV4_HEADER.format("b8 61")) == "0000"


def test_lrc_makes_the_frame_sum_to_zero(gateway):
    assert gateway("lrc 01 03 00 6b 00 03") == "8e"
    assert gateway("lrc 01 03 00 6b 00 03 8e") == "00"
    assert gateway("adler32") == "ERR usage: fletcher16|adler32|inetsum|lrc HEX..."


def test_nmea_good_sentences(gateway):
    sentence = "$GPGGA,123519,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,*47"
    assert gateway(f"nmea {sentence}") == "OK 47"
    assert gateway("nmea $GPXTE,A,A,0.67,L,N*6f") == "OK 6F"


def test_nmea_wrong_or_missing_checksum(gateway):
    assert gateway(f"nmea {GPGLL}*32") == "ERR checksum, computed 31"
    assert gateway(f"nmea {GPGLL}") == "ERR no checksum, computed 31"
    assert gateway(f"nmea {GPGLL}*3") == "ERR no checksum, computed 31"
    assert gateway("nmea GPGLL,4916.45*31") == "ERR no $"


def test_varint(gateway):
    assert gateway("varint 0") == "00"
    assert gateway("varint 127") == "7f"
    assert gateway("varint 128") == "8001"
    assert gateway("varint 300") == "ac02"
    assert gateway("varint 16384") == "808001"
    assert gateway("varint 9223372036854775807") == "ff" * 8 + "7f"
    assert gateway("varint -1") == "ERR usage: varint N | svarint N"


def test_svarint_zigzags(gateway):
    assert gateway("svarint 0") == "00"
    assert gateway("svarint -1") == "01"
    assert gateway("svarint 1") == "02"
    assert gateway("svarint -64") == "7f"
    assert gateway("svarint 64") == "8001"


def test_unvarint(gateway):
    assert gateway("unvarint ac 02 01 80 01") == "300 1 128"
    assert gateway("unvarint " + "ff" * 9 + "01") == "18446744073709551615"


def test_unvarint_errors(gateway):
    assert gateway("unvarint " + "ff" * 9 + "02") == "ERR overlong at byte 0"
    assert gateway("unvarint 01 ac") == "ERR truncated at byte 1"


def test_unsvarint(gateway):
    assert gateway("unsvarint 01 02 03 7f") == "-1 1 -2 -64"
    assert gateway("unsvarint " + "ff" * 9 + "01") == "-9223372036854775808"


def test_slip_escapes_end_and_esc_in_a_frame_that_fits(gateway):
    assert gateway("slip 11 c0 22 db 33") == "c011dbdc22dbdd33c0"
    assert gateway("slip " + "c0" * 47) == "c0" + "dbdc" * 47 + "c0"
    assert gateway("slip " + "c0" * 48) == "ERR frame too long"


def test_unslip(gateway):
    assert gateway("unslip c0 11 db dc 22 db dd 33 c0") == "11c022db33"
    assert gateway("unslip 11 c0 c0") == "11"
    assert gateway("unslip " + "aa" * 64 + "c0") == "aa" * 64


def test_unslip_errors(gateway):
    assert gateway("unslip 11 22") == "ERR unterminated frame"
    assert gateway("unslip 11 db") == "ERR unterminated frame"
    assert gateway("unslip 11 db 22 c0") == "ERR bad escape"
    assert gateway("unslip 11 c0 22") == "ERR bytes after the frame"
    assert gateway("unslip " + "aa" * 65 + "c0") == "ERR frame too long"


def test_slipfeed_keeps_a_frame_across_feeds(gateway):
    assert gateway("slipreset") == "OK"
    assert gateway("slipfeed c0 11 22") == "pending 2"
    assert gateway("slipfeed 33 c0 44 c0") == "112233 44"
    assert gateway("slipstat") == "frames 2 errors 0"


def test_slipfeed_shows_a_frame_of_the_largest_size(gateway):
    assert gateway("slipreset") == "OK"
    assert gateway("slipfeed " + "aa" * 64 + "c0") == "aa" * 64
    assert gateway("slipfeed " + "aa" * 65 + "c0 11 c0") == "! 11"
    assert gateway("slipstat") == "frames 2 errors 1"


def test_slipfeed_drops_a_broken_frame(gateway):
    assert gateway("slipreset") == "OK"
    assert gateway("slipfeed c0 11 db 22 33 c0 44 c0") == "! 44"
    assert gateway("slipfeed 11 db c0") == "!"
    assert gateway("slipstat") == "frames 1 errors 2"


def test_tlvput(gateway):
    assert gateway("tlvput 1 aa bb") == "0102aabb"
    assert gateway("tlvput 7") == "0700"


def test_tlvcount_takes_only_whole_shortest_form_records(gateway):
    assert gateway("tlvcount 01 01 aa 02 00 03 02 bb cc") == "3"
    assert gateway("tlvcount 01 01 aa 02 05 bb") == "ERR truncated after 1"
    assert gateway("tlvcount 01 81 05 aa bb cc dd ee") == "ERR bad length after 0"
    assert gateway("tlvcount 01 82 00 ff") == "ERR bad length after 0"
    assert gateway("tlvcount 01 00 02 80") == "ERR bad length after 1"


def test_tlvfind(gateway):
    assert gateway("tlvfind 3 01 01 aa 03 02 bb cc") == "bbcc"
    assert gateway("tlvfind 2 01 01 aa 02 00") == "empty"
    assert gateway("tlvfind 9 01 01 aa") == "ERR no type 9"


def test_cfgload_sets_the_kvstore_and_skips_unknown_types(gateway):
    assert gateway("wipe") == "OK"
    blob = "01 04 68 6f 6d 65 02 01 0b 03 02 01 2c 7f 01 00 04 04 12 34 56 78"
    assert gateway(f"cfgload {blob}") == "OK 4 applied 1 skipped"
    assert gateway("get ssid") == "home"
    assert gateway("get channel") == "11"
    assert gateway("get interval") == "300"
    assert gateway("get serial") == "305419896"


def test_cfgload_of_a_bad_blob_changes_nothing(gateway):
    assert gateway("wipe") == "OK"
    assert gateway("cfgload 01 04 68 6f 6d 65 02 02 00 0b") == "ERR bad value for type 2"
    assert gateway("cfgload 01 04 68 6f 6d 65 01 05 aa") == "ERR malformed blob"
    assert gateway("keys") == "0"


def test_cfgsave_builds_the_fields_in_order_and_checks_them(gateway):
    assert gateway("wipe") == "OK"
    assert gateway("cfgsave") == "empty"
    assert gateway("set serial 305419896") == "OK"
    assert gateway("set ssid home") == "OK"
    assert gateway("cfgsave") == "0104686f6d65040412345678"
    assert gateway("wipe") == "OK"
    assert gateway("set channel 256") == "OK"
    assert gateway("cfgsave") == "ERR bad value for type 2"
