#include "commands.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "cmdparse.h"
#include "crc8.h"
#include "led.h"
#include "numparse.h"
#include "ringbuf.h"
#include "uart.h"

#define CRC8_MAX_BYTES 64u

struct command {
    const char *name;
    void (*run)(char *args);
};

static struct ringbuf values;

/* Parses one integer argument, printing the error reply itself when it is not usable. */
static bool arg_i32(const char *token, int32_t *out)
{
    switch (parse_i32(token, out)) {
    case NUM_OK:
        return true;
    case NUM_RANGE:
        uart_printf_line("ERR range: %s", token);
        return false;
    case NUM_INVALID:
    default:
        uart_printf_line("ERR bad number: %s", token);
        return false;
    }
}

static void cmd_version(char *args)
{
    (void)args;
    uart_printf_line("%s", UARTCON_VERSION);
}

static void cmd_help(char *args)
{
    (void)args;
    uart_printf_line("commands: add buf crc8 echo help led parse rev version");
}

static void cmd_echo(char *args)
{
    uart_printf_line("%s", args);
}

static void cmd_rev(char *args)
{
    size_t len = strlen(args);

    for (size_t i = 0; i < len / 2; i++) {
        char c = args[i];
        args[i] = args[len - 1 - i];
        args[len - 1 - i] = c;
    }
    uart_printf_line("%s", args);
}

static void cmd_add(char *args)
{
    char *a_text = cmdparse_next_token(&args);
    char *b_text = cmdparse_next_token(&args);
    int32_t a;
    int32_t b;
    int64_t sum;

    if (a_text == NULL || b_text == NULL || cmdparse_next_token(&args) != NULL) {
        uart_printf_line("ERR usage: add <a> <b>");
        return;
    }
    if (!arg_i32(a_text, &a) || !arg_i32(b_text, &b)) {
        return;
    }
    sum = (int64_t)a + (int64_t)b;
    if (sum > INT32_MAX || sum < INT32_MIN) {
        uart_printf_line("ERR overflow");
        return;
    }
    uart_printf_line("%ld", (long)sum);
}

static void cmd_parse(char *args)
{
    char *text = cmdparse_next_token(&args);
    int32_t value;

    if (text == NULL || cmdparse_next_token(&args) != NULL) {
        uart_printf_line("ERR usage: parse <int>");
        return;
    }
    if (arg_i32(text, &value)) {
        uart_printf_line("OK %ld", (long)value);
    }
}

static void cmd_crc8(char *args)
{
    uint8_t bytes[CRC8_MAX_BYTES];
    size_t total = 0;
    char *token;

    if (*args == '\0') {
        uart_printf_line("ERR usage: crc8 <hex bytes>");
        return;
    }
    while ((token = cmdparse_next_token(&args)) != NULL) {
        size_t n = 0;
        switch (parse_hex_bytes(token, bytes + total, CRC8_MAX_BYTES - total, &n)) {
        case NUM_OK:
            total += n;
            break;
        case NUM_RANGE:
            uart_printf_line("ERR too many bytes");
            return;
        case NUM_INVALID:
        default:
            uart_printf_line("ERR bad hex: %s", token);
            return;
        }
    }
    uart_printf_line("0x%02X", (unsigned)crc8_smbus(bytes, total));
}

static void cmd_buf(char *args)
{
    char *op = cmdparse_next_token(&args);
    char *operand = cmdparse_next_token(&args);
    int32_t value;

    if (op != NULL && strcmp(op, "push") == 0 && operand != NULL) {
        if (!arg_i32(operand, &value)) {
            return;
        }
        uart_printf_line(ringbuf_push(&values, value) ? "OK" : "ERR full");
    } else if (op != NULL && strcmp(op, "pop") == 0 && operand == NULL) {
        if (ringbuf_pop(&values, &value)) {
            uart_printf_line("%ld", (long)value);
        } else {
            uart_printf_line("ERR empty");
        }
    } else if (op != NULL && strcmp(op, "len") == 0 && operand == NULL) {
        uart_printf_line("%u", ringbuf_len(&values));
    } else if (op != NULL && strcmp(op, "clear") == 0 && operand == NULL) {
        ringbuf_init(&values);
        uart_printf_line("OK");
    } else {
        uart_printf_line("ERR usage: buf push <n>|pop|len|clear");
    }
}

static void cmd_led(char *args)
{
    char *op = cmdparse_next_token(&args);

    if (op == NULL || cmdparse_next_token(&args) != NULL) {
        op = "";
    }
    if (strcmp(op, "on") == 0 || strcmp(op, "off") == 0) {
        led_set(strcmp(op, "on") == 0);
        uart_printf_line("OK");
    } else if (strcmp(op, "status") == 0) {
        uart_printf_line("LED %s", led_is_on() ? "on" : "off");
    } else {
        uart_printf_line("ERR usage: led on|off|status");
    }
}

static const struct command command_table[] = {
    {"add", cmd_add},
    {"buf", cmd_buf},
    {"crc8", cmd_crc8},
    {"echo", cmd_echo},
    {"help", cmd_help},
    {"led", cmd_led},
    {"parse", cmd_parse},
    {"rev", cmd_rev},
    {"version", cmd_version},
};

void commands_init(void)
{
    ringbuf_init(&values);
    led_init();
}

void commands_execute(char *line)
{
    struct cmdline cmd;

    cmdparse_split(line, &cmd);
    for (size_t i = 0; i < sizeof command_table / sizeof command_table[0]; i++) {
        if (strcmp(cmd.name, command_table[i].name) == 0) {
            command_table[i].run(cmd.args);
            return;
        }
    }
    uart_printf_line("ERR unknown command: %s", cmd.name);
}
