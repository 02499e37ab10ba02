/* UART console firmware: banner, then one command per line, each reply followed by a prompt. */
#include <stdbool.h>
#include <stddef.h>

#include "commands.h"
#include "uart.h"

#define LINE_MAX_CHARS 127u
#define PROMPT "> "

static bool is_blank(const char *line)
{
    for (; *line != '\0'; line++) {
        if (*line != ' ' && *line != '\t') {
            return false;
        }
    }
    return true;
}

int main(void)
{
    char line[LINE_MAX_CHARS + 1];
    size_t len = 0;
    bool overlong = false;
    bool after_cr = false;

    uart_init();
    commands_init();
    uart_puts(UARTCON_BANNER "\n" PROMPT);

    for (;;) {
        int c = uart_getc();
        if (c < 0) {
            return 0;
        }
        /* A line ends at '\r', '\n' or "\r\n": the '\n' of a "\r\n" pair is swallowed. */
        if (c == '\n' && after_cr) {
            after_cr = false;
            continue;
        }
        after_cr = (c == '\r');
        if (c == '\r' || c == '\n') {
            line[len] = '\0';
            if (overlong) {
                uart_printf_line("ERR line too long");
            } else if (!is_blank(line)) {
                commands_execute(line);
            }
            uart_puts(PROMPT);
            len = 0;
            overlong = false;
        } else if (c == '\b' || c == 0x7f) {
            if (len > 0) {
                len--;
            }
        } else if (len < LINE_MAX_CHARS) {
            line[len++] = (char)c;
        } else {
            overlong = true;
        }
    }
}
