#include "commands.h"

#include <stddef.h>
#include <stdint.h>

#include "adc.h"
#include "fletcher.h"
#include "fmt.h"
#include "gpio.h"
#include "uart.h"

static void reply(const char *first, const char *second)
{
    uart_puts(first);
    uart_puts(second);
    uart_putc('\n');
}

/* Splits off the first space-separated word: returns it and moves *rest past it. */
static char *next_word(char **rest)
{
    char *word = *rest;
    while (*word == ' ') {
        word++;
    }
    char *end = word;
    while (*end != '\0' && *end != ' ') {
        end++;
    }
    if (*end == ' ') {
        *end++ = '\0';
    }
    *rest = end;
    return word;
}

static int same(const char *a, const char *b)
{
    while (*a != '\0' && *a == *b) {
        a++;
        b++;
    }
    return *a == *b;
}

static void cmd_adc(char *args)
{
    const char *text = next_word(&args);
    uint32_t raw;
    if (*text == '\0' || *args != '\0') {
        reply("ERR usage: adc <raw>", "");
    } else if (!parse_u32(text, &raw)) {
        reply("ERR bad number: ", text);
    } else if (raw > ADC_MAX_RAW) {
        reply("ERR range: ", text);
    } else {
        put_dec(adc_to_millivolts(raw));
        reply(" mV", "");
    }
}

static void cmd_fletcher(const char *text)
{
    size_t len = 0;
    while (text[len] != '\0') {
        len++;
    }
    if (len == 0u) {
        reply("ERR usage: fletcher <text>", "");
        return;
    }
    put_hex(fletcher16((const uint8_t *)text, len), 4u);
    uart_putc('\n');
}

static void cmd_gpio(char *args)
{
    const char *action = next_word(&args);
    const char *pin_text = next_word(&args);
    uint32_t pin;
    int set = same(action, "set");
    if (same(action, "get") && *pin_text == '\0') {
        put_hex(gpio_read(), 8u);
        uart_putc('\n');
    } else if (!(set || same(action, "clear")) || *pin_text == '\0' || *args != '\0') {
        reply("ERR usage: gpio set|clear <pin> | gpio get", "");
    } else if (!parse_u32(pin_text, &pin) || !(set ? gpio_set(pin) : gpio_clear(pin))) {
        reply("ERR pin: ", pin_text);
    } else {
        reply("OK", "");
    }
}

void commands_execute(char *line)
{
    char *args = line;
    const char *command = next_word(&args);
    if (same(command, "version")) {
        reply("CM3FW ", FW_VERSION);
    } else if (same(command, "help")) {
        reply("commands: adc echo fletcher gpio help version", "");
    } else if (same(command, "echo")) {
        reply(args, "");
    } else if (same(command, "adc")) {
        cmd_adc(args);
    } else if (same(command, "fletcher")) {
        cmd_fletcher(args);
    } else if (same(command, "gpio")) {
        cmd_gpio(args);
    } else {
        reply("ERR unknown command: ", command);
    }
}
