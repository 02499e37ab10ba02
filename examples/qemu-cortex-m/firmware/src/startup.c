/* Vector table and reset handler: copy .data, zero .bss, run main. */
#include <stdint.h>

#include "uart.h"

typedef void (*vector_t)(void);

extern uint32_t __data_load, __data_start, __data_end, __bss_start, __bss_end, __stack_top;
extern int main(void);

void reset_handler(void);

void reset_handler(void)
{
    const uint32_t *src = &__data_load;
    for (uint32_t *dst = &__data_start; dst < &__data_end;) {
        *dst++ = *src++;
    }
    for (uint32_t *dst = &__bss_start; dst < &__bss_end;) {
        *dst++ = 0;
    }
    main();
    for (;;) {
        __asm volatile("wfi");
    }
}

/* A fault stops the firmware where a debugger can find it; the console goes silent. */
static void fault_handler(void)
{
    for (;;) {
        __asm volatile("wfi");
    }
}

/* 16 system exceptions, then the external interrupts; UART0 RX is external interrupt 0. */
__attribute__((section(".vectors"), used)) static const vector_t vectors[17] = {
    (vector_t)(uintptr_t)&__stack_top,
    reset_handler,
    fault_handler, /* NMI */
    fault_handler, /* HardFault */
    fault_handler, /* MemManage */
    fault_handler, /* BusFault */
    fault_handler, /* UsageFault */
    [16] = uart0_rx_irq_handler,
};
