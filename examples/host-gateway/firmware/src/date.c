/* Calendar dates of the event log: proleptic Gregorian, day 0 is 1970-01-01. */
#include <stdio.h>
#include <stdlib.h>

#include "gateway.h"

bool is_leap_year(long year)
{
    return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
}

int days_in_month(long year, int month)
{
    static const int lengths[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (month == 2 && is_leap_year(year)) {
        return 29;
    }
    return lengths[month - 1];
}

/* "YYYY-MM-DD", years 1..9999. */
bool parse_date(const char *text, struct civil_date *date)
{
    int year = 0;
    int month = 0;
    int day = 0;
    char tail = '\0';
    if (sscanf(text, "%d-%d-%d%c", &year, &month, &day, &tail) != 3) {
        return false;
    }
    if (year < 1 || year > 9999 || month < 1 || month > 12) {
        return false;
    }
    if (day < 1 || day > days_in_month(year, month)) {
        return false;
    }
    date->year = year;
    date->month = month;
    date->day = day;
    return true;
}

static long days_before_year(long year)
{
    long days = 0;
    if (year >= 1970) {
        for (long y = 1970; y < year; y++) {
            days += is_leap_year(y) ? 366 : 365;
        }
    } else {
        for (long y = year; y < 1970; y++) {
            days -= is_leap_year(y) ? 366 : 365;
        }
    }
    return days;
}

int day_of_year(const struct civil_date *date)
{
    int days = date->day;
    for (int m = 1; m < date->month; m++) {
        days += days_in_month(date->year, m);
    }
    return days;
}

long days_since_epoch(const struct civil_date *date)
{
    return days_before_year(date->year) + day_of_year(date) - 1;
}

struct civil_date date_from_days(long days)
{
    struct civil_date date = {1970, 1, 1};
    while (days < 0) {
        date.year--;
        days += is_leap_year(date.year) ? 366 : 365;
    }
    while (days >= (is_leap_year(date.year) ? 366 : 365)) {
        days -= is_leap_year(date.year) ? 366 : 365;
        date.year++;
    }
    while (days >= days_in_month(date.year, date.month)) {
        days -= days_in_month(date.year, date.month);
        date.month++;
    }
    date.day = (int)days + 1;
    return date;
}

/* 0 is Monday; 1970-01-01 was a Thursday. */
int date_weekday(const struct civil_date *date)
{
    long days = days_since_epoch(date);
    long weekday = (days + 3) % 7;
    return (int)(weekday < 0 ? weekday + 7 : weekday);
}

void format_date(const struct civil_date *date, char *out, size_t capacity)
{
    snprintf(out, capacity, "%04ld-%02d-%02d", date->year, date->month, date->day);
}
