#define _POSIX_C_SOURCE 200809L

#include "uart.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#define UART_LINE_MAX 256

static struct termios saved_termios;
static int termios_saved;

static void uart_restore(void)
{
    if (termios_saved) {
        tcsetattr(STDIN_FILENO, TCSANOW, &saved_termios);
    }
}

void uart_init(void)
{
    struct termios raw;

    if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &saved_termios) != 0) {
        return; /* a pipe or file: already a raw byte stream */
    }
    termios_saved = 1;
    atexit(uart_restore);

    /* Raw like a serial line: no echo, no line editing, no CR/LF translation either way.
     * ISIG stays on so Ctrl-C still stops the process from a terminal. */
    raw = saved_termios;
    raw.c_iflag &= ~(tcflag_t)(IGNBRK | BRKINT | PARMRK | ISTRIP | INLCR | IGNCR | ICRNL | IXON);
    raw.c_oflag &= ~(tcflag_t)OPOST;
    raw.c_lflag &= ~(tcflag_t)(ECHO | ECHONL | ICANON | IEXTEN);
    raw.c_cflag &= ~(tcflag_t)(CSIZE | PARENB);
    raw.c_cflag |= CS8;
    raw.c_cc[VMIN] = 1; /* read() blocks until a byte is there: no polling */
    raw.c_cc[VTIME] = 0;
    tcsetattr(STDIN_FILENO, TCSANOW, &raw);
}

int uart_getc(void)
{
    unsigned char byte;

    for (;;) {
        ssize_t n = read(STDIN_FILENO, &byte, 1);
        if (n == 1) {
            return byte;
        }
        if (n < 0 && errno == EINTR) {
            continue;
        }
        return -1; /* EOF, or the other end of the pty went away */
    }
}

void uart_write(const char *data, size_t len)
{
    /* Straight to the file descriptor: nothing sits in a stdio buffer between replies. */
    while (len > 0) {
        ssize_t n = write(STDOUT_FILENO, data, len);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return;
        }
        data += n;
        len -= (size_t)n;
    }
}

void uart_puts(const char *text)
{
    uart_write(text, strlen(text));
}

void uart_printf_line(const char *fmt, ...)
{
    char line[UART_LINE_MAX];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0) {
        n = 0;
    } else if ((size_t)n > sizeof line - 2) {
        n = (int)(sizeof line - 2);
    }
    line[n] = '\n';
    uart_write(line, (size_t)n + 1);
}
