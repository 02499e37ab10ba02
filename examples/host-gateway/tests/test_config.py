"""The settings file, quoted arguments, the conditioning of inputs and Modbus RTU."""


def test_ini_settings_before_and_in_a_section(gateway):
    assert gateway("inireset") == "OK"
    assert gateway("ini [net]") == "section net"
    assert gateway("ini ssid = home") == "set net.ssid"
    assert gateway("get net.ssid") == "home"
    assert gateway("inireset") == "OK"
    assert gateway("ini mode=auto") == "set mode"
    assert gateway("get mode") == "auto"
    assert gateway("ini") == "blank"
    assert gateway("ini ; a comment") == "blank"
    assert gateway("ini # another") == "blank"


def test_ini_quoted_value_keeps_blanks_and_semicolons(gateway):
    assert gateway("inireset") == "OK"
    assert gateway('ini name = "a b ; c" ; comment') == "set name"
    assert gateway("get name") == "a b ; c"


def test_ini_comment_after_a_blank_ends_the_value(gateway):
    assert gateway("inireset") == "OK"
    assert gateway("ini port = 8080 ; default") == "set port"
    assert gateway("get port") == "8080"
    assert gateway("ini tag = a;b#c") == "set tag"
    assert gateway("get tag") == "a;b#c"
    assert gateway("ini empty = ; nothing") == "set empty"
    assert gateway("get empty") == ""
    assert gateway("ini bare =; x") == "set bare"
    assert gateway("get bare") == "; x"


def test_ini_errors_say_the_line(gateway):
    assert gateway("inireset") == "OK"
    assert gateway("ini [net") == "ERR line 1: missing ]"
    assert gateway("ini [net] x") == "ERR line 2: text after ]"
    assert gateway("ini [n t]") == "ERR line 3: bad section name"
    assert gateway("ini just text") == "ERR line 4: expected key = value"
    assert gateway("ini bad key = 1") == "ERR line 5: bad key"
    assert gateway('ini k = "open') == "ERR line 6: bad quotes"
    assert gateway("inireset") == "OK"
    assert gateway("ini [abcdefghijklmn]") == "ERR line 1: section name too long"
    assert gateway("ini [abcdefghijklm]") == "section abcdefghijklm"
    assert gateway("ini [net]") == "section net"
    assert gateway("ini abcdefghijkl = 1") == "ERR line 4: key too long"
    assert gateway("ini abcdefghijk = 1") == "set net.abcdefghijk"
    assert gateway("ini v = " + "x" * 32) == "ERR line 6: value too long"


def test_inistat_counts_lines_settings_and_errors(gateway):
    assert gateway("inireset") == "OK"
    gateway("ini [net]")
    gateway("ini ssid = home")
    gateway("ini nonsense")
    gateway("ini")
    assert gateway("inistat") == "lines 4 settings 1 errors 1"


def test_tokens_split_on_blanks_outside_quotes(gateway):
    assert gateway("tokens a b c") == "3 [a] [b] [c]"
    assert gateway("tokens") == "0"
    assert gateway("tokens 'a b' c") == "2 [a b] [c]"
    assert gateway('tokens "x \\" y"') == '1 [x " y]'
    assert gateway('tokens a"b c"d') == "1 [ab cd]"
    assert gateway('tokens "" x') == "2 [] [x]"


def test_tokens_backslashes(gateway):
    assert gateway("tokens a\\ b") == "1 [a b]"
    assert gateway('tokens "a\\qb"') == "1 [a\\qb]"
    assert gateway("tokens 'a\\b'") == "1 [a\\b]"


def test_tokens_errors(gateway):
    assert gateway("tokens 'abc") == "ERR unterminated quote"
    assert gateway("tokens abc\\") == "ERR backslash at the end"
    assert gateway("tokens " + " ".join("x" * 17)) == "ERR too many tokens"
    assert gateway("tokens " + "x" * 300) == "ERR line too long"


def test_debounce_needs_settled_samples(gateway):
    assert gateway("debounce 3 1110001111") == "0011100011"
    assert gateway("debounce 3 1101011") == "0000001"
    assert gateway("debounce 1 0110") == "0110"
    assert gateway("debounce 0 01") == "ERR usage: debounce SAMPLES BITS"
    assert gateway("debounce 3 012") == "ERR usage: debounce SAMPLES BITS"


def test_hyst_switches_at_the_thresholds(gateway):
    assert gateway("hyst 10 20 5 15 20 15 10 15 25") == "0011001"
    assert gateway("hyst 20 10 5 15 20 15 10 15 25") == "0011001"


def test_despike_takes_the_median_of_three(gateway):
    assert gateway("despike 1 2 9 3 4") == "1.000 2.000 2.000 3.000 4.000"
    assert gateway("despike 5 5 100 5 5") == "5.000 5.000 5.000 5.000 5.000"


def test_slew_limits_each_step(gateway):
    assert gateway("slew 0.5 0 2 2 -1") == "0.000 0.500 1.000 0.500"


def test_calib_of_a_4_20_ma_channel(gateway):
    assert gateway("calib 800 0 4000 10 800 2400 4000") == "0.000 5.000 10.000"
    assert gateway("calib 800 0 4000 10 0 4800") == "-2.500 12.500"


def test_calib_rounds_to_the_nearest_on_a_falling_line_too(gateway):
    assert gateway("calib 0 0 3 1 1 2") == "0.333 0.667"
    assert gateway("calib 0 100 100 0 25") == "75.000"


def test_calib_saturates_and_needs_two_readings(gateway):
    assert gateway("calib 0 0 1 30000 3") == "32768.000"
    assert gateway("calib 5 0 5 1 5") == "ERR the two points have the same reading"


def test_mbcrc_and_mbframe_low_byte_first(gateway):
    assert gateway("mbcrc 31 32 33 34 35 36 37 38 39") == "4b37"
    assert gateway("mbframe 01 03 00 00 00 0a") == "01030000000ac5cd"


def test_mbread_request(gateway):
    assert gateway("mbread 17 107 3") == "1103006b00037687"
    assert gateway("mbread 248 0 1") == "ERR usage: mbread SLAVE START COUNT"


def test_mbslave_write_single_then_read(gateway):
    assert gateway("mbaddr 1") == "OK"
    assert gateway("mbslave 01 06 00 05 12 34 94 bc") == "01060005123494bc"
    assert gateway("mbreg 5") == "4660"
    assert gateway("mbslave 01 03 00 04 00 02 85 ca") == "01030400001234f744"


def test_mbslave_write_multiple(gateway):
    assert gateway("mbaddr 1") == "OK"
    request = "01 10 00 00 00 02 04 00 0a 01 02 53 fc"
    assert gateway(f"mbslave {request}") == "01100000000241c8"
    assert gateway("mbreg 0") == "10"
    assert gateway("mbreg 1") == "258"


def test_mbslave_exceptions(gateway):
    assert gateway("mbaddr 1") == "OK"
    assert gateway("mbslave 01 04 00 00 00 01 31 ca") == "01840182c0"
    assert gateway("mbslave 01 03 00 1f 00 02 f5 cd") == "018302c0f1"
    assert gateway("mbslave 01 03 00 00 00 00 45 ca") == "0183030131"
    assert gateway("mbslave 01 03 00 00 00 7e c5 ea") == "0183030131"


def test_mbslave_answers_no_broadcast_and_no_bad_frame(gateway):
    assert gateway("mbaddr 1") == "OK"
    assert gateway("mbslave 02 03 00 00 00 01 84 39") == "ERR not ours"
    assert gateway("mbslave 01 03 00 00 00 01 84 39") == "ERR bad crc"
    assert gateway("mbslave 01 03 00") == "ERR too short"
    assert gateway("mbaddr 1") == "OK"
    assert gateway("mbslave 00 06 00 07 00 63 79 f3") == "OK broadcast"
    assert gateway("mbreg 7") == "99"


def test_mbaddr(gateway):
    assert gateway("mbaddr 5") == "OK"
    assert gateway("mbaddr") == "5"
    assert gateway("mbaddr 0") == "ERR usage: mbaddr [1..247] | mbreg INDEX"
    assert gateway("mbreg 32") == "ERR usage: mbaddr [1..247] | mbreg INDEX"
    assert gateway("mbaddr 1") == "OK"


def test_mbparse_values_and_exceptions(gateway):
    assert gateway("mbparse 01 03 04 00 0a 01 02 5a 60") == "slave 1: 10 258"
    assert gateway("mbparse 01 83 02 c0 f1") == "slave 1: exception 2"


def test_mbparse_errors(gateway):
    assert gateway("mbparse 01 03 04 00 0a 01 02 5a 61") == "ERR bad crc"
    assert gateway("mbparse 01 03 03 00 0a 01 82 ee") == "ERR malformed"
