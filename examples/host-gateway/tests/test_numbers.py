"""Fixed-point arithmetic, statistics and smoothing of sensor readings."""


def test_fmul(gateway):
    assert gateway("fmul 1.5 2") == "3.000"


def test_fmul_negative(gateway):
    assert gateway("fmul -2.25 4") == "-9.000"


def test_fdiv(gateway):
    assert gateway("fdiv 1 4") == "0.250"


def test_fdiv_by_zero(gateway):
    assert gateway("fdiv 1 0") == "ERR division by zero"


def test_fsqrt_of_two(gateway):
    assert gateway("fsqrt 2") == "1.414"


def test_fsqrt_of_a_square(gateway):
    assert gateway("fsqrt 16") == "4.000"


def test_min_max(gateway):
    assert gateway("min 4 -2 9") == "-2"
    assert gateway("max 4 -2 9") == "9"


def test_mean(gateway):
    assert gateway("mean 1 2 3 4") == "2.500"


def test_stddev(gateway):
    assert gateway("stddev 2 4 4 4 5 5 7 9") == "2.000"


def test_median_of_a_few(gateway):
    assert gateway("median 5 1 3") == "3.000"


def test_median_of_an_even_few(gateway):
    assert gateway("median 4 1 3 2") == "2.500"


def test_median_of_a_day_of_readings(gateway):
    assert gateway("median 21 19 23 18 25 20 22 24 17 26 16 27") == "21.500"


def test_median_of_a_noisy_batch(gateway):
    assert gateway("median 5 3 9 1 7 2 8 4 6 10 12 11 13") == "7.000"


def test_sort_a_few(gateway):
    assert gateway("sort 3 1 2") == "1 2 3"


def test_sort_with_duplicates(gateway):
    assert gateway("sort 2 2 1 3 1") == "1 1 2 2 3"


def test_movavg(gateway):
    assert gateway("movavg 2 1 2 3 4") == "1.000 1.500 2.500 3.500"


def test_ema(gateway):
    assert gateway("ema 0.5 10 20") == "15.000"


def test_pid_saturates_and_recovers(gateway):
    assert gateway("pid 1 0.1 0 50 40 45") == "11.000 6.500"


def test_pid_clamps_at_the_top(gateway):
    assert gateway("pid 20 0 0 50 0") == "100.000"


def test_popcount(gateway):
    assert gateway("popcount 0xff00ff") == "16"


def test_parity(gateway):
    assert gateway("parity 7") == "1"


def test_clz(gateway):
    assert gateway("clz 1") == "31"


def test_rev8(gateway):
    assert gateway("rev8 0x01") == "0x80"


def test_rev32(gateway):
    assert gateway("rev32 1") == "0x80000000"
