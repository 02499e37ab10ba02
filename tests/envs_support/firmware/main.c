/*
 * Tiny console firmware for the fwloop QEMU tests (mps2-an385, CMSDK UART0).
 *
 * Prints a banner, then answers one command per line:
 *   ping -> pong, echo TEXT -> TEXT, version -> FW_VERSION, anything else -> ERR unknown.
 * The CPU sleeps in `wfi` until the UART receive interrupt is pending, so an idle QEMU costs
 * no host CPU. Interrupts stay masked (PRIMASK): the pending bit wakes `wfi`, no handler runs.
 */
#include <stdint.h>

#ifndef FW_VERSION
#define FW_VERSION "1.0"
#endif

#define UART0_BASE 0x40004000u
#define UART_DATA (*(volatile uint32_t *)(UART0_BASE + 0x000u))
#define UART_STATE (*(volatile uint32_t *)(UART0_BASE + 0x004u))
#define UART_CTRL (*(volatile uint32_t *)(UART0_BASE + 0x008u))
#define UART_INTCLEAR (*(volatile uint32_t *)(UART0_BASE + 0x00Cu))
#define UART_BAUDDIV (*(volatile uint32_t *)(UART0_BASE + 0x010u))

#define STATE_TX_FULL (1u << 0)
#define STATE_RX_FULL (1u << 1)
#define CTRL_TX_EN (1u << 0)
#define CTRL_RX_EN (1u << 1)
#define CTRL_RX_INT_EN (1u << 3)
#define INT_RX (1u << 1)

#define NVIC_ISER0 (*(volatile uint32_t *)0xE000E100u)
#define NVIC_ICPR0 (*(volatile uint32_t *)0xE000E280u)
#define UART0_RX_IRQ 0u

#define SYSCLK_HZ 25000000u
#define BAUD 115200u
#define LINE_MAX 128u

static void uart_init(void)
{
    UART_BAUDDIV = SYSCLK_HZ / BAUD; /* QEMU ignores the UART below 16 */
    UART_CTRL = CTRL_TX_EN | CTRL_RX_EN | CTRL_RX_INT_EN;
    NVIC_ISER0 = 1u << UART0_RX_IRQ;
    /* QEMU's UART tells the host side it can take input again only when DATA is read; without
     * this read the first input waits for QEMU's next idle poll, about a second. */
    (void)UART_DATA;
}

static void put_char(char c)
{
    while (UART_STATE & STATE_TX_FULL) {
    }
    UART_DATA = (uint32_t)(unsigned char)c;
}

static void put_str(const char *s)
{
    while (*s) {
        put_char(*s++);
    }
}

static char get_char(void)
{
    while (!(UART_STATE & STATE_RX_FULL)) {
        __asm volatile("wfi");
        /* Lower the UART's line first, or the NVIC re-pends the level interrupt at once. */
        UART_INTCLEAR = INT_RX;
        NVIC_ICPR0 = 1u << UART0_RX_IRQ;
    }
    return (char)UART_DATA;
}

static int starts_with(const char *s, const char *prefix)
{
    while (*prefix) {
        if (*s++ != *prefix++) {
            return 0;
        }
    }
    return 1;
}

static int equals(const char *a, const char *b)
{
    while (*a && *a == *b) {
        a++;
        b++;
    }
    return *a == *b;
}

static void answer(const char *line)
{
    if (equals(line, "ping")) {
        put_str("pong\n");
    } else if (equals(line, "version")) {
        put_str(FW_VERSION "\n");
    } else if (starts_with(line, "echo ")) {
        put_str(line + 5);
        put_str("\n");
    } else if (line[0] != '\0') {
        put_str("ERR unknown command\n");
    }
    put_str("> ");
}

int main(void)
{
    char line[LINE_MAX];
    unsigned len = 0;

    __asm volatile("cpsid i");
    uart_init();
    put_str("FWTEST " FW_VERSION " ready\n> ");
    for (;;) {
        char c = get_char();
        if (c == '\r' || c == '\n') {
            line[len] = '\0';
            answer(line);
            len = 0;
        } else if (len < LINE_MAX - 1u) {
            line[len++] = c;
        }
    }
}
