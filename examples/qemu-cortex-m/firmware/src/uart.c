/* Interrupt-driven console on UART0: the RX interrupt fills a ring, the main loop sleeps in
 * `wfi` while the ring is empty, so an idle firmware costs QEMU no host CPU. */
#include "uart.h"

#include <stdint.h>

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
#define UART0_RX_IRQ 0u

#define SYSCLK_HZ 25000000u
#define BAUD 115200u

/* A power of two, so the free-running indices wrap correctly. */
#define RX_RING_SIZE 256u

static volatile char rx_ring[RX_RING_SIZE];
static volatile uint32_t rx_head; /* written by the interrupt handler only */
static volatile uint32_t rx_tail; /* written by uart_getc only */

void uart_init(void)
{
    UART_BAUDDIV = SYSCLK_HZ / BAUD; /* 217; the CMSDK UART needs at least 16 */
    UART_CTRL = CTRL_TX_EN | CTRL_RX_EN | CTRL_RX_INT_EN;
    NVIC_ISER0 = 1u << UART0_RX_IRQ;
    /* QEMU lets the host side send again only when DATA is read; without this read the first
     * input waits for QEMU's next idle poll, about a second later. */
    (void)UART_DATA;
}

void uart0_rx_irq_handler(void)
{
    /* Clear before reading: a byte arriving after the read raises the interrupt again. */
    for (;;) {
        UART_INTCLEAR = INT_RX;
        if (!(UART_STATE & STATE_RX_FULL)) {
            return;
        }
        char c = (char)UART_DATA;
        if (rx_head - rx_tail < RX_RING_SIZE) {
            rx_ring[rx_head % RX_RING_SIZE] = c;
            rx_head++;
        }
    }
}

char uart_getc(void)
{
    for (;;) {
        /* Masked, so the interrupt cannot slip in between the check and the wfi; a pending
         * interrupt still ends the wfi, and runs once the mask is lifted. */
        __asm volatile("cpsid i" ::: "memory");
        if (rx_head != rx_tail) {
            char c = rx_ring[rx_tail % RX_RING_SIZE];
            rx_tail++;
            __asm volatile("cpsie i" ::: "memory");
            return c;
        }
        __asm volatile("wfi");
        __asm volatile("cpsie i" ::: "memory");
    }
}

void uart_putc(char c)
{
    while (UART_STATE & STATE_TX_FULL) {
    }
    UART_DATA = (uint32_t)(unsigned char)c;
}

void uart_puts(const char *s)
{
    while (*s) {
        uart_putc(*s++);
    }
}
