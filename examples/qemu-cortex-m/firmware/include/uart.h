/* CMSDK APB UART0 of the MPS2 board: the firmware's console. */
#ifndef CM3FW_UART_H
#define CM3FW_UART_H

/* Enables TX, RX and the RX interrupt; call once, before anything is sent. */
void uart_init(void);

/* Sleeps (wfi) until a byte has arrived, then returns it. */
char uart_getc(void);

void uart_putc(char c);
void uart_puts(const char *s);

/* The RX interrupt handler, placed in the vector table by startup.c. */
void uart0_rx_irq_handler(void);

#endif
