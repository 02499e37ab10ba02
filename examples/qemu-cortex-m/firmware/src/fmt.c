#include "fmt.h"

#include "uart.h"

void put_dec(uint32_t value)
{
    char digits[10];
    unsigned n = 0;
    do {
        digits[n++] = (char)('0' + value % 10u);
        value /= 10u;
    } while (value != 0u);
    while (n > 0u) {
        uart_putc(digits[--n]);
    }
}

void put_hex(uint32_t value, unsigned digits)
{
    uart_puts("0x");
    while (digits > 0u) {
        digits--;
        uart_putc("0123456789ABCDEF"[(value >> (4u * digits)) & 0xFu]);
    }
}

static int digit_value(char c, uint32_t base)
{
    int value = -1;
    if (c >= '0' && c <= '9') {
        value = c - '0';
    } else if (c >= 'a' && c <= 'f') {
        value = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
        value = c - 'A' + 10;
    }
    return value < (int)base ? value : -1;
}

bool parse_u32(const char *text, uint32_t *value)
{
    uint32_t base = 10u;
    uint32_t result = 0u;
    if (text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
        base = 16u;
        text += 2;
    }
    if (*text == '\0') {
        return false;
    }
    for (; *text != '\0'; text++) {
        int digit = digit_value(*text, base);
        if (digit < 0 || result > (UINT32_MAX - (uint32_t)digit) / base) {
            return false;
        }
        result = result * base + (uint32_t)digit;
    }
    *value = result;
    return true;
}
