"""The settings store, the uplink queue and the event log's dates."""


def test_set_and_get(gateway):
    assert gateway("set ssid home") == "OK"
    assert gateway("get ssid") == "home"


def test_get_missing(gateway):
    assert gateway("get nothing") == "ERR no such key"


def test_del(gateway):
    gateway("set tmp 1")
    assert gateway("del tmp") == "OK"
    assert gateway("get tmp") == "ERR no such key"


def test_keys_and_wipe(gateway):
    gateway("wipe")
    gateway("set a 1")
    gateway("set b 2")
    assert gateway("keys") == "2"
    assert gateway("wipe") == "OK"
    assert gateway("keys") == "0"


def test_queue_order(gateway):
    gateway("qclear")
    for n in (1, 2, 3):
        assert gateway(f"push {n}") == "OK"
    assert [gateway("pop") for _ in range(3)] == ["1", "2", "3"]


def test_queue_full(gateway):
    gateway("qclear")
    for n in range(8):
        gateway(f"push {n}")
    assert gateway("push 9") == "ERR queue full"
    assert gateway("qlen") == "8"


def test_queue_empty(gateway):
    gateway("qclear")
    assert gateway("pop") == "ERR queue empty"


def test_weekday_of_the_epoch(gateway):
    assert gateway("weekday 1970-01-01") == "thu"


def test_weekday_of_a_recent_day(gateway):
    assert gateway("weekday 2024-03-15") == "fri"


def test_weekday_of_the_log_rollover(gateway):
    assert gateway("weekday 2000-03-01") == "wed"


def test_weekday_in_the_next_century(gateway):
    assert gateway("weekday 2100-03-01") == "mon"


def test_yday_in_autumn(gateway):
    assert gateway("yday 2023-10-01") == "274"


def test_yday_after_february_2000(gateway):
    assert gateway("yday 2000-12-31") == "366"


def test_epoch_of_the_millennium(gateway):
    assert gateway("epoch 2001-01-01") == "11323"


def test_adddays_across_a_month(gateway):
    assert gateway("adddays 2023-01-30 3") == "2023-02-02"


def test_adddays_backwards(gateway):
    assert gateway("adddays 1970-01-01 -1") == "1969-12-31"


def test_bad_date(gateway):
    assert gateway("weekday 2023-02-29") == "ERR usage: weekday|yday|epoch DATE | adddays DATE N"


def test_upper(gateway):
    assert gateway("upper gw ok") == "GW OK"
