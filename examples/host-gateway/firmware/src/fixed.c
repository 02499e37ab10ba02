/* Q16.16 fixed point: the gateway has no FPU. */
#include <stdio.h>
#include <stdlib.h>

#include "gateway.h"

#define Q16_MAX INT32_MAX
#define Q16_MIN INT32_MIN

static q16_t saturate(int64_t value)
{
    if (value > Q16_MAX) {
        return Q16_MAX;
    }
    if (value < Q16_MIN) {
        return Q16_MIN;
    }
    return (q16_t)value;
}

q16_t q16_from_int(long value)
{
    return saturate((int64_t)value * Q16_ONE);
}

/* Rounded to nearest, halves away from zero. */
q16_t q16_mul(q16_t a, q16_t b)
{
    int64_t product = (int64_t)a * b;
    int64_t half = product >= 0 ? (1 << 15) : -(1 << 15);
    return saturate((product + half) / Q16_ONE);
}

q16_t q16_div(q16_t a, q16_t b, bool *ok)
{
    if (b == 0) {
        *ok = false;
        return 0;
    }
    *ok = true;
    int64_t scaled = (int64_t)a * Q16_ONE;
    int64_t half = ((scaled < 0) != (b < 0)) ? -(llabs(b) / 2) : llabs(b) / 2;
    return saturate((scaled + half * (b < 0 ? -1 : 1)) / b);
}

/* Bit by bit, as a square root of the 64-bit value a << 16; negative is 0. */
q16_t q16_sqrt(q16_t a)
{
    if (a <= 0) {
        return 0;
    }
    uint64_t value = (uint64_t)a << 16;
    uint64_t root = 0;
    uint64_t bit = 1ull << 62;
    while (bit > value) {
        bit >>= 2;
    }
    while (bit != 0) {
        if (value >= root + bit) {
            value -= root + bit;
            root = (root >> 1) + bit;
        } else {
            root >>= 1;
        }
        bit >>= 2;
    }
    if (value > root) {
        root++;
    }
    return (q16_t)root;
}

/* "12", "-3.25", "0.5": at most four decimals. */
bool q16_parse(const char *text, q16_t *value)
{
    bool negative = false;
    int64_t whole = 0;
    int64_t fraction = 0;
    int64_t scale = 1;
    if (*text == '-') {
        negative = true;
        text++;
    }
    if (*text < '0' || *text > '9') {
        return false;
    }
    while (*text >= '0' && *text <= '9') {
        whole = whole * 10 + (*text++ - '0');
        if (whole > 32767) {
            return false;
        }
    }
    if (*text == '.') {
        text++;
        while (*text >= '0' && *text <= '9' && scale < 10000) {
            fraction = fraction * 10 + (*text++ - '0');
            scale *= 10;
        }
    }
    if (*text != '\0') {
        return false;
    }
    int64_t raw = whole * Q16_ONE + (fraction * Q16_ONE + scale / 2) / scale;
    *value = saturate(negative ? -raw : raw);
    return true;
}

/* Three decimals, rounded: 1.5 -> "1.500". */
void q16_format(q16_t value, char *out, size_t capacity)
{
    int64_t v = value;
    const char *sign = v < 0 ? "-" : "";
    if (v < 0) {
        v = -v;
    }
    int64_t thousandths = (v * 1000 + Q16_ONE / 2) / Q16_ONE;
    snprintf(out, capacity, "%s%lld.%03lld", sign, (long long)(thousandths / 1000),
             (long long)(thousandths % 1000));
}
