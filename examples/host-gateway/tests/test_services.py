"""The event log, the uplink's rate limiter, the task scheduler and the flash records."""

PAYLOADS = ["11" * 32, "22" * 32, "33" * 32, "44" * 32]


def test_logadd_numbers_events_from_one(gateway):
    assert gateway("logclear") == "OK"
    assert gateway("logadd 10 1 5") == "OK 1"
    assert gateway("logadd 20 2 -3") == "OK 2"
    assert gateway("logget 2") == "time 20 code 2 value -3"


def test_logadd_refuses_an_earlier_time_and_bad_fields(gateway):
    assert gateway("logclear") == "OK"
    assert gateway("logadd 10 1 0") == "OK 1"
    assert gateway("logadd 9 1 0") == "ERR time before the last event"
    assert gateway("logadd 10 1 0") == "OK 2"
    assert gateway("logadd 1 65536 0") == "ERR usage: logadd TIME CODE VALUE"
    assert gateway("logadd 1 1 2147483648") == "ERR usage: logadd TIME CODE VALUE"


def test_logget_of_an_event_never_logged(gateway):
    assert gateway("logclear") == "OK"
    assert gateway("loginfo") == "count 0 overwritten 0"
    assert gateway("logadd 1 1 1") == "OK 1"
    assert gateway("logget 0") == "ERR no such event"
    assert gateway("logget 2") == "ERR no such event"


def fill_log(gateway, events):
    assert gateway("logclear") == "OK"
    for i in range(events):
        assert gateway(f"logadd {10 * i} 7 {i}") == f"OK {i + 1}"


def test_log_ring_overwrites_the_oldest(gateway):
    fill_log(gateway, 18)
    assert gateway("loginfo") == "count 16 overwritten 2 first #3 last #18"
    assert gateway("logget 2") == "ERR overwritten"
    assert gateway("logget 3") == "time 20 code 7 value 2"
    assert gateway("logget 18") == "time 170 code 7 value 17"


def test_logrange_after_the_ring_wrapped(gateway):
    fill_log(gateway, 18)
    assert gateway("logcount 30 50") == "3"
    assert gateway("logrange 30 50") == "#4@30 #5@40 #6@50"
    assert gateway("logrange 0 25") == "#3@20"
    assert gateway("logcount 171 500") == "0"


def test_logrange_of_events_at_the_same_time(gateway):
    assert gateway("logclear") == "OK"
    for _ in range(3):
        gateway("logadd 5 1 0")
    assert gateway("logadd 7 1 0") == "OK 4"
    assert gateway("logrange 5 5") == "#1@5 #2@5 #3@5"
    assert gateway("logrange 6 6") == "none"
    assert gateway("logcount 9 1") == "0"


def test_tbtake_takes_from_a_full_bucket(gateway):
    assert gateway("tbinit 5 2 0") == "OK"
    assert gateway("tbtake 0 3") == "OK 2.000"
    assert gateway("tblevel 500") == "3.000"
    assert gateway("tblevel 10000") == "5.000"


def test_tbwait_is_never_past_the_capacity_or_without_a_rate(gateway):
    assert gateway("tbinit 5 2 0") == "OK"
    assert gateway("tbtake 0 6") == "DENY never"
    assert gateway("tbwait 0 6") == "never"
    assert gateway("tblevel 0") == "5.000"
    assert gateway("tbinit 2 0 0") == "OK"
    assert gateway("tbtake 0 2") == "OK 0.000"
    assert gateway("tbwait 100000 1") == "never"


def test_tbtake_denied_says_how_long_to_wait_for_the_tokens(gateway):
    assert gateway("tbinit 1 1 0") == "OK"
    assert gateway("tbtake 0") == "OK 0.000"
    assert gateway("tbtake 0") == "DENY wait 1000"
    assert gateway("tbwait 400") == "600"
    assert gateway("tblevel 400") == "0.400"
    assert gateway("tbinit 3 1 0") == "OK"
    assert gateway("tbtake 0 3") == "OK 0.000"
    assert gateway("tbwait 250 2") == "1750"
    assert gateway("tbwait 250 0") == "0"


def test_tbwait_counts_from_now_before_the_refill_point(gateway):
    assert gateway("tbinit 1 1 1000") == "OK"
    assert gateway("tbtake 1000") == "OK 0.000"
    assert gateway("tbwait 500") == "1500"
    assert gateway("tbwait 1500") == "500"
    assert gateway("tbinit 2 1 1000") == "OK"
    assert gateway("tbtake 1000 2") == "OK 0.000"
    assert gateway("tblevel 1500") == "0.500"
    assert gateway("tblevel 1200") == "0.500"
    assert gateway("tblevel 1600") == "0.600"


def test_tb_ticks_wrap(gateway):
    assert gateway("tbinit 1 1 4294967000") == "OK"
    assert gateway("tbtake 4294967000") == "OK 0.000"
    assert gateway("tblevel 200") == "0.496"


def test_tick_runs_a_task_every_period(gateway):
    assert gateway("schedreset") == "OK"
    assert gateway("taskadd blink 10") == "OK"
    assert gateway("tick 25") == "blink@0 blink@10 blink@20"
    assert gateway("taskruns blink") == "3"
    assert gateway("tasknext") == "blink@30"


def test_tick_runs_tasks_due_together_in_the_order_added(gateway):
    assert gateway("schedreset") == "OK"
    assert gateway("taskadd slow 10 5") == "OK"
    assert gateway("taskadd fast 5") == "OK"
    assert gateway("tick 12") == "fast@0 slow@5 fast@5 fast@10"


def test_task_of_period_zero_runs_once(gateway):
    assert gateway("schedreset") == "OK"
    assert gateway("taskadd once 0 3") == "OK"
    assert gateway("tick 10") == "once@3"
    assert gateway("tick 10") == "idle, now 20"
    assert gateway("taskruns once") == "1"
    assert gateway("tasknext") == "idle"


def test_taskon_does_not_make_up_missed_runs(gateway):
    assert gateway("schedreset") == "OK"
    assert gateway("taskadd beat 10") == "OK"
    assert gateway("tick 0") == "beat@0"
    assert gateway("taskoff beat") == "OK"
    assert gateway("tick 30") == "idle, now 30"
    assert gateway("taskon beat") == "OK"
    assert gateway("tasknext") == "beat@40"


def test_schedule_from_a_start_tick_and_across_the_wrap(gateway):
    assert gateway("schedreset 100") == "OK"
    assert gateway("taskadd poll 7") == "OK"
    assert gateway("tick 14") == "poll@100 poll@107 poll@114"
    assert gateway("schedreset 4294967290") == "OK"
    assert gateway("taskadd wrap 4") == "OK"
    assert gateway("tick 10") == "wrap@4294967290 wrap@4294967294 wrap@2"
    assert gateway("tasknext") == "wrap@6"


def test_taskadd_errors(gateway):
    assert gateway("schedreset") == "OK"
    assert gateway("taskadd Blink 10") == "ERR bad name"
    assert gateway("taskadd abcdefghijkl 10") == "ERR bad name"
    for i in range(8):
        assert gateway(f"taskadd t{i} 10") == "OK"
    assert gateway("taskadd t0 10") == "ERR duplicate"
    assert gateway("taskadd t8 10") == "ERR no free task"
    assert gateway("taskdel t3") == "OK"
    assert gateway("taskdel t3") == "ERR no such task"
    assert gateway("taskruns t3") == "ERR no such task"
    assert gateway("taskadd t8 10") == "OK"


def test_recput_recget_and_recdel(gateway):
    assert gateway("recformat") == "OK"
    assert gateway("recinfo") == "bank 0 gen 1 used 4 live 0 bad 0"
    assert gateway("recput 3 aa bb") == "OK"
    assert gateway("recget 3") == "aabb"
    assert gateway("recinfo") == "bank 0 gen 1 used 11 live 1 bad 0"
    assert gateway("recput 3 cc") == "OK"
    assert gateway("recget 3") == "cc"
    assert gateway("recinfo") == "bank 0 gen 1 used 17 live 1 bad 0"
    assert gateway("recformat") == "OK"
    assert gateway("recput 4 01") == "OK"
    assert gateway("recdel 4") == "OK"
    assert gateway("recget 4") == "ERR no such record"
    assert gateway("recdel 4") == "ERR no such record"
    assert gateway("recinfo") == "bank 0 gen 1 used 15 live 0 bad 0"


def test_rec_commands_reject_bad_arguments(gateway):
    assert gateway("recput 32 aa") == "ERR bad record"
    assert gateway("recput 1 " + "aa" * 33) == "ERR bad record"
    assert gateway("recflip 128 1") == "ERR usage: recflip OFFSET MASK"


def test_recmount_finds_the_records_or_formats_a_broken_bank(gateway):
    assert gateway("recformat") == "OK"
    assert gateway("recput 2 42") == "OK"
    assert gateway("recput 5 43 44") == "OK"
    assert gateway("recdel 2") == "OK"
    assert gateway("recmount") == "bank 0 gen 1 used 22 live 1 bad 0"
    assert gateway("recget 5") == "4344"
    assert gateway("recformat") == "OK"
    assert gateway("recput 1 aa") == "OK"
    assert gateway("recflip 0 0xff") == "OK"
    assert gateway("recmount") == "bank 0 gen 1 used 4 live 0 bad 0"


def test_recget_of_a_flipped_bit_is_corrupt(gateway):
    assert gateway("recformat") == "OK"
    assert gateway("recput 1 11 22") == "OK"
    assert gateway("recflip 7 0x01") == "OK"
    assert gateway("recget 1") == "ERR corrupt record"
    assert gateway("recmount") == "bank 0 gen 1 used 11 live 0 bad 1"


def test_recput_compacts_into_the_other_bank(gateway):
    assert gateway("recformat") == "OK"
    for payload in PAYLOADS:
        assert gateway(f"recput 1 {payload}") == "OK"
    assert gateway("recinfo") == "bank 1 gen 2 used 78 live 1 bad 0"
    assert gateway("recget 1") == PAYLOADS[3]
    assert gateway("recmount") == "bank 1 gen 2 used 78 live 1 bad 0"


def test_recput_when_the_live_records_fill_the_bank(gateway):
    assert gateway("recformat") == "OK"
    for id_, payload in enumerate(PAYLOADS[:3], start=1):
        assert gateway(f"recput {id_} {payload}") == "OK"
    assert gateway(f"recput 4 {PAYLOADS[3]}") == "ERR flash full"
    assert gateway("recinfo") == "bank 1 gen 2 used 115 live 3 bad 0"
    assert gateway("recget 2") == PAYLOADS[1]
