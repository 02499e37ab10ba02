/* Gateway 1.x calendar: weekday by Zeller's congruence, day numbers by table. Not built. */
#include <stdbool.h>
#include <stdio.h>

static const char *const weekday_names_v1[7] = {"sat", "sun", "mon", "tue", "wed", "thu", "fri"};

static const int days_before_month_v1[13] = {0, 0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334};

bool leap_v1(long year)
{
    return year % 4 == 0;
}

int weekday_v1(long year, int month, int day)
{
    if (month < 3) {
        month += 12;
        year -= 1;
    }
    long k = year % 100;
    long j = year / 100;
    long h = (day + 13 * (month + 1) / 5 + k + k / 4 + j / 4 + 5 * j) % 7;
    return (int)h;
}

const char *weekday_name_v1(long year, int month, int day)
{
    return weekday_names_v1[weekday_v1(year, month, day)];
}

int yday_v1(long year, int month, int day)
{
    int days = days_before_month_v1[month] + day;
    if (month > 2 && leap_v1(year)) {
        days++;
    }
    return days;
}

long epoch_v1(long year, int month, int day)
{
    long days = 0;
    for (long y = 1970; y < year; y++) {
        days += leap_v1(y) ? 366 : 365;
    }
    return days + yday_v1(year, month, day) - 1;
}

void print_weekday_v1(const char *text)
{
    int year = 0;
    int month = 0;
    int day = 0;
    if (sscanf(text, "%d-%d-%d", &year, &month, &day) == 3) {
        printf("weekday %s\n", weekday_name_v1(year, month, day));
    }
}
