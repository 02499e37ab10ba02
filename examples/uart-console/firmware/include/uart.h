/* UART driver: the console's only link to the outside world.
 * On the host the "UART" is stdin/stdout; a terminal is switched to raw mode so that
 * bytes pass unchanged in both directions, as they would on a real serial line. */
#ifndef UARTCON_UART_H
#define UARTCON_UART_H

#include <stddef.h>

void uart_init(void);

/* Blocks until one byte arrives; returns it (0..255) or -1 when the line is closed. */
int uart_getc(void);

void uart_write(const char *data, size_t len);
void uart_puts(const char *text);

/* Formats one reply and sends it followed by "\n"; output longer than a line is truncated. */
void uart_printf_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
