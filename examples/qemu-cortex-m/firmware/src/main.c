/* Console firmware for QEMU mps2-an385: banner, then one command per line, each reply followed
 * by the prompt "> ". Lines end with '\n', '\r' or "\r\n". */
#include <stddef.h>

#include "commands.h"
#include "uart.h"

#define LINE_MAX_CHARS 127u
#define PROMPT "> "

static int is_blank(const char *line)
{
    for (; *line != '\0'; line++) {
        if (*line != ' ') {
            return 0;
        }
    }
    return 1;
}

int main(void)
{
    char line[LINE_MAX_CHARS + 1u];
    size_t len = 0;
    int overlong = 0;
    int after_cr = 0;

    uart_init();
    uart_puts("CM3FW " FW_VERSION " ready\n" PROMPT);
    for (;;) {
        char c = uart_getc();
        if (c == '\n' && after_cr) {
            after_cr = 0;
            continue;
        }
        after_cr = (c == '\r');
        if (c != '\r' && c != '\n') {
            if (len < LINE_MAX_CHARS) {
                line[len++] = c;
            } else {
                overlong = 1;
            }
            continue;
        }
        line[len] = '\0';
        if (overlong) {
            uart_puts("ERR line too long\n");
        } else if (!is_blank(line)) {
            commands_execute(line);
        }
        uart_puts(PROMPT);
        len = 0;
        overlong = 0;
    }
}
